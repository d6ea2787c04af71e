"""Dropout with a faster mask on CPU.

``torch.nn.Dropout`` draws its mask with ``bernoulli_``, which on the CPU is slower than
comparing a uniform draw against p (docs/benchmarks.md). The comparison is made in place on
the draw, which becomes the scaled mask itself: one tensor and one product with x, not a bool
mask converted for two products (the same values, bit for bit, and the same draws).

``lanes=True`` (the Transformer's) draws a quarter as many numbers: each random 64-bit word
gives four 16-bit lanes, each compared with p rounded to 1/65536 (p = 0.3 drops 0.30000305 of
the values, and the kept ones are scaled by that rate's 1 / (1 - p)). Generating the numbers is
most of a CPU mask's cost: at the Transformer's feed-forward width a mask takes less than half
the time (docs/benchmarks.md). The RNN keeps one float draw per value, the draws its behaviour
reference (tests/test_behaviour_reference.py) recorded. On CUDA the fused kernel is used as it is.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

LANE_LEVELS = 65536  # a 16-bit lane's values


class Dropout(nn.Module):
    def __init__(self, p: float, lanes: bool = False):
        super().__init__()
        self.p = p
        self.lanes = lanes

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        if x.is_cuda:
            return F.dropout(x, self.p, training=True)
        if self.lanes:
            return x * lane_mask(x, self.p)
        mask = torch.rand_like(x).ge_(self.p).mul_(1.0 / (1.0 - self.p))  # 0 or 1 / (1 - p)
        return x * mask

    def extra_repr(self) -> str:
        return f"p={self.p}"


def lane_mask(x: torch.Tensor, p: float) -> torch.Tensor:
    """A dropout mask shaped like x from 16-bit lanes of random 64-bit words: 0 where dropped
    (probability round(p · 65536) / 65536), 1 / (1 - that) where kept."""
    dropped = round(p * LANE_LEVELS)
    count = x.numel()
    words = torch.empty((count + 3) // 4, dtype=torch.int64, device=x.device).random_(-(2**63), None)
    lanes = words.view(torch.int16)[:count].view_as(x)  # uniform over [-32768, 32767]
    return (lanes >= dropped - LANE_LEVELS // 2).to(x.dtype).mul_(LANE_LEVELS / (LANE_LEVELS - dropped))
