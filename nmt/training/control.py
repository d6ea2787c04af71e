"""Run control in one place: whether a training run goes on, and why it ended.

A run ends at the first of: ``train.epochs`` epochs done; a callback's reason to stop (early
stopping is one, ``nmt tune``'s pruner another: ``nmt/training/callbacks.py``); the time budget
(``train.max_minutes``) spent; a stop signal (SIGINT, SIGTERM, SIGHUP), which checkpoints and
raises ``TrainingInterrupted`` so that ``--resume`` goes on. The learning rate is not decided
here but by one function of the run's position (``nmt.training.schedule.learning_rate``).

Under torchrun every process asks the same questions at the same steps and one collective
agrees on the answers, so that all ranks stop together.

A wall-clock budget for training (``train.max_minutes``, ``nmt train --minutes N``).

The clock counts every second spent inside ``Trainer.run`` — training steps, validation,
checkpoints — across resumed sessions (the spent seconds travel in the checkpoint), so a
budget means the same on any machine: this much time, then the best model so far.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import NamedTuple

import torch

from nmt.config.schema import TrainConfig
from nmt.training.distributed import Distributed
from nmt.training.schedule import RunPosition
from nmt.training.state import Progress, StopFlag


class StepVerdict(NamedTuple):
    """After a step, on every rank alike."""

    stop_signal: bool  # a stop signal arrived: checkpoint and stop
    out_of_time: bool  # the time budget is spent: end the epoch here
    checkpoint_due: bool  # train.checkpoint_minutes has passed since the last checkpoint


class RunControl:
    """The run's stop conditions and clock: ``ended`` says why the run is over (or None),
    ``after_step`` whether a signal, the budget or a checkpoint interval calls after a step."""

    def __init__(
        self, cfg: TrainConfig, ddp: Distributed, device: torch.device, clock: Callable[[], float] | None = None
    ):
        self.cfg, self.ddp, self.device = cfg, ddp, device
        self.clock = clock or time.monotonic  # what the budget and checkpoint intervals read (tests give a fake one)
        self.signal = StopFlag()  # set by a stop signal while training runs
        self.budget = TimeBudget(cfg.max_minutes, clock=self.clock)
        self.out_of_time = False  # the budget ran out inside the epoch being trained
        self.last_saved = self.clock()  # for train.checkpoint_minutes

    def start(self, progress: Progress) -> None:
        """The clock starts for this session, counting what earlier sessions spent."""
        self.budget = TimeBudget(self.cfg.max_minutes, progress.elapsed_seconds, self.clock)
        self.last_saved = self.clock()

    def position(self, progress: Progress, epoch: int, batch: int, epoch_length: int) -> RunPosition:
        """Where the run is before batch ``batch`` of epoch ``epoch``."""
        return RunPosition(epoch, batch, epoch_length, self.budget.spent(), progress.lr_reductions, progress.step)

    def budget_spent(self) -> bool:
        """The budget (train.max_minutes) is spent, on this rank."""
        return bool(self.cfg.max_minutes) and self.budget.exhausted()

    def checkpoint_due(self) -> bool:
        """train.checkpoint_minutes have passed since the last checkpoint (on this rank's clock)."""
        return bool(self.cfg.checkpoint_minutes) and self.clock() - self.last_saved >= 60 * self.cfg.checkpoint_minutes

    def after_step(self, check_point: bool) -> StepVerdict:
        """What the run control says after a step. Its flags are host values; under DDP one
        collective agrees on all three, and on a GPU only at the steps that read figures anyway
        (``check_point``), since it syncs the host."""
        if self.ddp.enabled and not check_point:
            return StepVerdict(False, False, False)
        flags = [bool(self.signal), self.budget_spent(), self.checkpoint_due()]
        return StepVerdict(*self.ddp.any_of(flags, self.device))

    def ended(self, progress: Progress) -> str | None:
        """Why the run is over, or None while it goes on (a collective under torchrun when there
        is a budget: every rank calls it at the same point)."""
        if progress.epoch >= self.cfg.epochs:
            return f"{progress.epoch} epochs"
        if progress.stop_reason:
            return progress.stop_reason
        if self.cfg.max_minutes and self.ddp.any(self.budget_spent(), self.device):
            minutes = f"{self.cfg.max_minutes:g}-minute budget"
            return (
                f"{minutes} spent after {progress.step} steps; --resume --minutes M goes on, M counting the whole "
                f"run's minutes (more than {self.cfg.max_minutes:g})"
            )
        return None


class TimeBudget:
    def __init__(self, minutes: float, spent_before: float = 0.0, clock: Callable[[], float] | None = None):
        self.limit = minutes * 60.0  # seconds; 0 = no budget
        self.spent_before = spent_before  # seconds spent by earlier sessions of the run
        self.clock = clock or time.monotonic
        self.started = self.clock()

    def spent(self) -> float:
        """Seconds spent so far, earlier sessions included."""
        return self.spent_before + self.clock() - self.started

    def exhausted(self) -> bool:
        return self.limit > 0 and self.spent() >= self.limit
