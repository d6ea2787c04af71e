"""Dropout with a faster mask on CPU.

``torch.nn.Dropout`` draws its mask with ``bernoulli_``, which on the CPU is slower than
comparing a uniform draw against p (docs/benchmarks.md). On CUDA the fused kernel is used
as it is.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class Dropout(nn.Module):
    def __init__(self, p: float):
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        if x.is_cuda:
            return F.dropout(x, self.p, training=True)
        keep = torch.rand_like(x) >= self.p
        return x * keep * (1.0 / (1.0 - self.p))

    def extra_repr(self) -> str:
        return f"p={self.p}"
