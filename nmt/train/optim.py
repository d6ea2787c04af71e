"""The optimizer and the learning-rate schedule, built in one place from ``train.*``."""

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


def budget_learning_rate(base: float, floor: float, spent_fraction: float, hold: float = 0.0) -> float:
    """``train.lr_schedule: budget``: ``base`` for the first ``hold`` of the time budget, then a
    linear fall to ``floor`` at its end (linear decay suits a known budget best among the
    schedules compared by Li et al., 2020, "Budgeted Training")."""
    decayed = (min(1.0, spent_fraction) - hold) / (1.0 - hold)
    return max(floor, base * (1.0 - max(0.0, decayed)))


def build_scheduler(optimizer: torch.optim.Optimizer, cfg: TrainConfig) -> torch.optim.lr_scheduler.ReduceLROnPlateau:
    """Lower the learning rate by ``lr_factor`` after ``lr_patience`` epochs without a better dev BLEU."""
    return torch.optim.lr_scheduler.ReduceLROnPlateau(
        optimizer, mode="max", factor=cfg.lr_factor, patience=cfg.lr_patience, min_lr=cfg.min_lr
    )
