#!/usr/bin/env python
"""What a new batch shape costs the Transformer's training step, with and without cuDNN's fused
attention kernel (on CUDA; why nmt.core.device.skip_cudnn_attention switches it off).

Batches by tokens (train.batch_tokens) change shape nearly every step, and search changes its key
length every step. PyTorch picks cuDNN's attention for the Transformer's padding and causal masks,
and cuDNN builds a plan for each new shape. This times one pass of training steps over batches of
new shapes (about --tokens target tokens each), then the same batches again, for each kernel
choice, on JoeyNMT's Transformer sizes (3 + 3 layers, 256 wide, 4 heads, feed-forward 1024) under
bf16 autocast. Random tokens: only the timing is read.

    python scripts/bench/bench_attention_kernels.py --device cuda
    python scripts/bench/bench_attention_kernels.py --device cpu --shapes 2 --tokens 500
"""

from __future__ import annotations

import argparse
import time

import bench_common as bc
import joeynmt_peer
import torch

from nmt.config.files import load_config
from nmt.data.tokenizer import PAD_ID
from nmt.model.base import build_model

VOCAB = 4000


def shapes(count: int, tokens: int, offset: int) -> list[tuple[int, int, int]]:
    """``count`` (rows, source length, target length) of about ``tokens`` target tokens each; a
    different ``offset`` gives shapes not seen before."""
    lengths = range(8, 8 + count)
    return [(max(1, tokens // t - offset), t + t % 3 - 1, t) for t in lengths]


def batch(rows: int, source: int, target: int, device: torch.device):
    generator = torch.Generator().manual_seed(rows * 1000 + source * 10 + target)
    src = torch.randint(4, VOCAB, (rows, source), generator=generator)  # (B, S)
    lengths = torch.randint(max(1, source // 2), source + 1, (rows,), generator=generator)
    lengths[0] = source
    src[torch.arange(source)[None, :] >= lengths[:, None]] = PAD_ID
    tgt = torch.randint(4, VOCAB, (rows, target), generator=generator)  # (B, T)
    return src.to(device), lengths.to(device), tgt.to(device)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--shapes", type=int, default=36, help="new batch shapes per kernel choice")
    parser.add_argument("--tokens", type=int, default=8000, help="target tokens a batch")
    args = parser.parse_args()
    device = bc.setup_device(args.device, 0)
    torch.backends.cuda.enable_cudnn_sdp(True)  # setup_device switched it off, as every command does
    config = load_config("configs/eng-mar-gpu.yaml", joeynmt_peer.TRANSFORMER_OVERRIDES)
    torch.manual_seed(0)
    model = build_model(config.model, VOCAB, VOCAB).to(device).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)

    def step(src, lengths, tgt) -> None:
        with torch.autocast(device.type, dtype=torch.bfloat16):
            logits, _ = model(src, lengths, tgt)
        logits.float().logsumexp(-1).mean().backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    def timed(label: str, offset: int) -> None:
        made = [batch(*shape, device) for shape in shapes(args.shapes, args.tokens, offset)]
        passes = []
        for _ in range(2):  # new shapes, then the same shapes again
            bc.sync(device)
            start = time.perf_counter()
            for inputs in made:
                step(*inputs)
            bc.sync(device)
            passes.append((time.perf_counter() - start) / len(made) * 1000)
        print(f"| {label} | {passes[0]:,.1f} | {passes[1]:,.1f} |", flush=True)

    queries = torch.randn(8, 4, 30, 64, device=device, dtype=torch.bfloat16)
    keys = torch.randn(8, 4, 27, 64, device=device, dtype=torch.bfloat16)
    mask = torch.ones(8, 1, 1, 27, dtype=torch.bool, device=device)
    names = {int(value): name for name, value in torch.nn.attention.SDPBackend.__members__.items()}

    def chosen() -> str:
        padding = names[torch._fused_sdp_choice(queries, keys, keys, mask, 0.1, False)]
        causal = names[torch._fused_sdp_choice(queries, queries, queries, None, 0.1, True)]
        return f"{padding} (padding mask), {causal} (causal)"

    print(f"Hardware: {bc.hardware()}")
    print(f"Kernels PyTorch picks: {chosen()}")
    for _ in range(2):  # warm-up: the first CUDA calls, cuBLAS
        step(*batch(*shapes(1, args.tokens, 40)[0], device))
    print(f"\n{args.shapes} new batch shapes of about {args.tokens:,} target tokens, ms a training step\n")
    print("| attention kernels | new shapes | the same shapes again |\n|---|---:|---:|")
    timed("PyTorch's choice", 0)
    torch.backends.cuda.enable_cudnn_sdp(False)
    timed(f"without cuDNN's: {chosen()}", 7)
    torch.backends.cuda.enable_cudnn_sdp(True)
    timed("PyTorch's choice again, other new shapes", 13)


if __name__ == "__main__":
    main()
