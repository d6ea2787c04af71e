#!/usr/bin/env python
"""Where a training step spends its time: torch.profiler over N steps, top operators.

python scripts/bench/profile_train.py --config configs/eng-mar.yaml \
    --set model.attention=luong-concat model.input_feeding=true
"""

from __future__ import annotations

import argparse

import bench_common as bc
from torch.profiler import ProfilerActivity, profile


def main() -> None:
    from nmt.data.batching import collate
    from nmt.runtime.loading import load_tokenizers
    from nmt.training.data import epoch_batches, load_train_data
    from nmt.training.step import train_step

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="configs/eng-mar.yaml")
    parser.add_argument("--set", nargs="*", default=[])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--rows", type=int, default=25)
    args = parser.parse_args()
    device = bc.setup_device(args.device, 0)
    config = bc.load(args.config, args.set)
    src_tok, tgt_tok = load_tokenizers(config)
    data = load_train_data(config, src_tok, tgt_tok)
    _, _, model, optimizer = bc.model_and_optimizer(config, device)
    batches = epoch_batches(data.train, config.train, 1)[: args.steps + 3]

    def step(indices):
        batch = collate([data.train[i] for i in indices])
        train_step(model, batch.to(device), optimizer, config.train, batch.num_tgt_tokens)

    for indices in batches[:3]:
        step(indices)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        for indices in batches[3:]:
            step(indices)
        bc.sync(device)
    sort = "cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    print(prof.key_averages().table(sort_by=sort, row_limit=args.rows))


if __name__ == "__main__":
    main()
