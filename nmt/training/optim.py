"""The optimizer and the weights' moving average.

The optimizer, built from ``train.*`` (its learning rate is set at every step by
``nmt.training.schedule.learning_rate``).

An exponential moving average of the weights (``train.ema_decay``; not ``nmt average``,
which averages saved checkpoints): after every update its shadow copy of the weights moves
shadow <- decay * shadow + (1 - decay) * weights. Validated beside the raw weights each
epoch; the better of the two is what the checkpoint translates with.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from nmt.config.schema import TrainConfig


def make_adam(parameters: list[torch.nn.Parameter], learning_rate: float) -> torch.optim.Adam:
    """Adam with the fused kernel where this PyTorch has it for the device, else the foreach
    one (docs/benchmarks.md: the fused step is several times faster on the CPU)."""
    try:
        return torch.optim.Adam(parameters, lr=learning_rate, fused=True)
    except (RuntimeError, TypeError, ValueError):
        return torch.optim.Adam(parameters, lr=learning_rate, foreach=True)


def build_optimizer(model: torch.nn.Module, cfg: TrainConfig) -> torch.optim.Adam:
    return make_adam(list(model.parameters()), cfg.learning_rate)


class EmaWeights:
    def __init__(self, model: torch.nn.Module, decay: float):
        self.decay = decay
        self.names = [name for name, _ in model.named_parameters()]
        self.params: list[torch.Tensor] = [param for _, param in model.named_parameters()]
        self.shadow = [param.detach().clone() for param in self.params]

    @torch.no_grad()
    def reset(self) -> None:
        """Start the average again from the weights as they are now (a checkpoint without one loaded)."""
        torch._foreach_copy_(self.shadow, [param.detach() for param in self.params])

    @torch.no_grad()
    def update(self) -> None:
        torch._foreach_lerp_(self.shadow, [param.detach() for param in self.params], 1.0 - self.decay)

    @contextlib.contextmanager
    def swapped_in(self) -> Iterator[None]:
        """The model holds the averaged weights inside the block, its own again after it."""
        own = [param.detach().clone() for param in self.params]
        with torch.no_grad():
            torch._foreach_copy_(self.params, self.shadow)
        try:
            yield
        finally:
            with torch.no_grad():
                torch._foreach_copy_(self.params, own)

    def state_dict(self) -> dict[str, torch.Tensor]:
        return dict(zip(self.names, self.shadow))

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        with torch.no_grad():
            torch._foreach_copy_(self.shadow, [state[name].to(a.device) for name, a in zip(self.names, self.shadow)])
