#!/usr/bin/env python
"""Does mixed precision cost translation quality? The same training (same seed, same number
of steps) in float32, in bf16 autocast with the recurrences kept in float32 (what
``train.precision: bf16`` and ``auto`` on a GPU do), and — the ablation — in bf16 autocast
with the recurrences in bf16 too (as PyTorch's autocast alone would run them); dev BLEU and
chrF of each (greedy), and the time.

    python scripts/studies/precision_quality.py --config configs/eng-mar-cpu.yaml --epochs 2 --device cpu

On a GPU pass --device cuda (and --dtype fp16 for an older GPU's policy). Each variant trains
in its own run directory under runs/precision-quality/ (resumable: a finished one is read).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time
from pathlib import Path

import torch

from nmt.config.files import load_config
from nmt.core.device import prepare_device
from nmt.pipelines.prepare import prepare
from nmt.training.trainer import build_trainer

VARIANTS = ("float32", "mixed, float32 recurrences", "mixed, 16-bit recurrences")


@contextlib.contextmanager
def sixteen_bit_recurrences():
    """The ablation: the recurrences follow autocast like every other layer."""
    import nmt.model.fast
    import nmt.model.rnn.decoder
    import nmt.model.rnn.encoder
    import nmt.model.rnn.model

    modules = (nmt.model.fast, nmt.model.rnn.decoder, nmt.model.rnn.encoder, nmt.model.rnn.model)
    saved = nmt.model.fast.run_in_float32
    for module in modules:
        module.run_in_float32 = lambda function, *args: function(*args)
    try:
        yield
    finally:
        for module in modules:
            module.run_in_float32 = saved


def train_variant(args, variant: str) -> dict:
    precision = "float32" if variant == "float32" else args.dtype
    run_dir = Path("runs/precision-quality") / f"{Path(args.config).stem}-{variant.replace(' ', '-').replace(',', '')}"
    overrides = [f"run_dir={run_dir}", f"train.precision={precision}", f"train.epochs={args.epochs}"]
    overrides += ["train.max_minutes=0", "train.lr_schedule=plateau", "train.patience=0", f"train.seed={args.seed}"]
    config = load_config(args.config, overrides)
    config.data.prepared_dir = str(Path(load_config(args.config).prepared_dir))  # share the prepared data
    prepare(config, log=lambda message: None)
    device = prepare_device(args.device)
    start = time.perf_counter()
    with sixteen_bit_recurrences() if variant.endswith("16-bit recurrences") else contextlib.nullcontext():
        trainer = build_trainer(config, device)
        progress = trainer.run(resume=True)
    last = trainer.metrics.read()[-1]
    return {
        "variant": variant,
        "precision": precision,
        "dev_bleu": last["dev_bleu"],
        "dev_chrf": last["dev_chrf"],
        "best_dev_bleu": progress.best_bleu,
        "steps": progress.step,
        "seconds": round(time.perf_counter() - start, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="configs/eng-mar-cpu.yaml")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--dtype", choices=("bf16", "fp16"), default="bf16", help="the mixed precision to compare")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--variants", nargs="*", default=list(VARIANTS), choices=VARIANTS)
    args = parser.parse_args()
    rows = [train_variant(args, variant) for variant in args.variants]
    print(f"\n{args.config}, {args.epochs} epochs, seed {args.seed}, {args.device}, torch {torch.__version__}")
    print("| variant | dev BLEU (last epoch) | dev chrF | steps | seconds |\n|---|---:|---:|---:|---:|")
    for row in rows:
        bleu, chrf = f"{row['dev_bleu']:.2f}", f"{row['dev_chrf']:.2f}"
        print(f"| {row['variant']} | {bleu} | {chrf} | {row['steps']} | {row['seconds']} |")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
