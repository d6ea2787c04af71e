"""An epoch's running sums (loss, tokens, gradient norms) kept on the device without a host sync
per step, what its progress bar shows, and what a mid-epoch checkpoint carries of them."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass

import torch

from nmt.training.distributed import Distributed
from nmt.training.state import Progress
from nmt.training.step import StepResult


def duration(seconds: float) -> str:
    """'45 s', '12.5 min', '3 h 20 min'."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    return f"{seconds // 3600:.0f} h {seconds % 3600 / 60:02.0f} min"


@dataclass
class EpochStats:
    loss: float  # mean per target token
    tokens: int
    seconds: float
    grad_norm: float = 0.0  # mean gradient norm (before clipping) of the epoch's finite steps

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0


class EpochMeter:
    """One epoch's running sums. Each step adds to float32 sums on the device (no host sync;
    MPS has no float64); reading them (every few steps: it syncs a GPU) folds them into
    Python floats, so the epoch's totals keep double precision. Continues the sums a
    mid-epoch checkpoint saved."""

    def __init__(self, progress: Progress, device: torch.device):
        self.earlier = (progress.epoch_loss, progress.epoch_tokens)  # all ranks' sums at the checkpoint resumed
        self.earlier_norms = (progress.epoch_norm_sum, progress.epoch_norm_steps)  # and its gradient norms
        self.loss, self.tokens = 0.0, 0.0  # this rank's, this session
        self.norm_sum, self.norm_steps = 0.0, 0  # this session's finite steps
        self.pending = torch.zeros(4, device=device)  # since the last read: loss, tokens, norm sum, finite steps
        self.in_a_row = torch.zeros((), device=device)  # skipped steps in a row
        self.skipped = torch.zeros((), device=device)  # not yet counted in progress.nonfinite_steps
        self.start = time.perf_counter() - progress.epoch_seconds

    def add(self, result: StepResult, tokens: int) -> None:
        finite = (~result.nonfinite).float()  # a skipped step adds nothing but its count
        loss, norm = torch.nan_to_num(torch.stack([result.loss_sum.float(), result.grad_norm.float()]), 0.0, 0.0, 0.0)
        self.pending += torch.stack([loss * finite, finite * tokens, norm * finite, finite])
        self.in_a_row = (self.in_a_row + 1) * result.nonfinite
        self.skipped += result.nonfinite

    def fold(self) -> None:
        """Move the device sums into the Python totals (one host sync)."""
        loss, tokens, norm, steps = self.pending.tolist()
        self.loss, self.tokens, self.norm_sum, self.norm_steps = (
            self.loss + loss,
            self.tokens + tokens,
            self.norm_sum + norm,
            self.norm_steps + round(steps),
        )
        self.pending.zero_()

    def postfix(self) -> dict[str, str]:
        self.fold()
        seconds = time.perf_counter() - self.start
        return {"loss": f"{self.loss / max(1.0, self.tokens):.3f}", "tok_s": f"{self.tokens / seconds:.0f}"}  # rank 0's

    def save_into(self, progress: Progress, ddp: Distributed) -> None:
        """Write the sums of every rank into ``progress``, as a checkpoint must carry them (under
        torchrun a collective: every rank calls it at the same step)."""
        self.fold()
        loss, tokens = ddp.sum([self.loss, self.tokens], self.pending.device)
        progress.epoch_loss = self.earlier[0] + loss
        progress.epoch_tokens = self.earlier[1] + round(tokens)
        progress.epoch_seconds = time.perf_counter() - self.start
        progress.epoch_norm_sum = self.earlier_norms[0] + self.norm_sum
        progress.epoch_norm_steps = self.earlier_norms[1] + self.norm_steps
        progress.nonfinite_steps += int(self.skipped.item())
        self.skipped.zero_()

    def grad_norm(self) -> float:
        """The epoch's mean gradient norm, its steps before a resume included."""
        self.fold()
        return (self.earlier_norms[0] + self.norm_sum) / max(1, self.earlier_norms[1] + self.norm_steps)

    @contextlib.contextmanager
    def paused(self):
        """Time spent inside (a validation within the epoch) is not the epoch's training time."""
        paused_at = time.perf_counter()
        try:
            yield
        finally:
            self.start += time.perf_counter() - paused_at

    def stats(self, progress: Progress, ddp: Distributed) -> EpochStats:
        """The epoch so far: every rank's loss and tokens, rank 0's time."""
        self.save_into(progress, ddp)
        return EpochStats(
            progress.epoch_loss / max(1, progress.epoch_tokens),
            progress.epoch_tokens,
            progress.epoch_seconds,
            self.grad_norm(),
        )
