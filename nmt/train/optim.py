"""The optimizer, built from ``train.*`` (its learning rate is set at every step by
``nmt.train.schedule.learning_rate``)."""

from __future__ import annotations

import torch

from nmt.config import TrainConfig


def make_adam(parameters: list[torch.nn.Parameter], learning_rate: float) -> torch.optim.Adam:
    """Adam with the fused kernel where this PyTorch has it for the device, else the foreach
    one (docs/benchmarks.md: the fused step is several times faster on the CPU)."""
    try:
        return torch.optim.Adam(parameters, lr=learning_rate, fused=True)
    except (RuntimeError, TypeError, ValueError):
        return torch.optim.Adam(parameters, lr=learning_rate, foreach=True)


def build_optimizer(model: torch.nn.Module, cfg: TrainConfig) -> torch.optim.Adam:
    return make_adam(list(model.parameters()), cfg.learning_rate)
