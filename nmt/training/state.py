"""What a checkpoint must carry to resume exactly: progress, RNG states; and the flag a
SIGINT/SIGTERM sets so training stops at a step boundary."""

from __future__ import annotations

import contextlib
import math
import random
import signal
import threading
from dataclasses import dataclass, field

import numpy as np
import torch

from nmt.config.schema import TrainConfig
from nmt.core.errors import NmtError

# At an equal dev BLEU a validation is better only if its dev loss (nats per token) is lower by
# this much: a run whose weights hardly move (a learning rate of 1e-9) is not learning.
LOSS_TIE_BREAK = 1e-3


@dataclass
class Progress:
    epoch: int = 0  # epochs completed
    step: int = 0  # optimizer updates done
    best_bleu: float = -1.0
    best_loss: float = math.inf  # the dev loss at the best validation: it breaks a tie in BLEU
    best_epoch: int = 0  # the epoch the best validation fell in (a partial one counts)
    best_step: int = 0  # and the update it followed
    # the best among the validations that count (not a partial one): what patience and the plateau schedule
    # compare with, so that a run the budget stopped mid-epoch resumes to an uninterrupted run's schedule
    counted_bleu: float = -1.0
    counted_loss: float = math.inf
    bad_epochs: int = 0  # validations since the last improvement (early stopping counts them)
    lr_stalled: int = 0  # plateau schedule: validations since the last improvement or reduction
    lr_reductions: int = 0  # plateau schedule: times the learning rate was lowered
    train_seconds: float = 0.0  # time spent in training epochs (validation excluded)
    elapsed_seconds: float = 0.0  # wall clock spent in training runs, validation and checkpoints included
    stop_reason: str = ""  # why a callback (early stopping, a pruner) ended the run; "" while it goes on
    nonfinite_steps: int = 0  # updates skipped for a non-finite loss or gradient
    own_pair_since: int = 0  # train.related_until: the first epoch of this pair's pairs alone (0: not yet)
    # Inside an unfinished epoch (checkpoints every N steps, validation every N steps, a stop by signal):
    batch_in_epoch: int = 0  # batches of epoch + 1 already done
    epoch_loss: float = 0.0  # their summed loss
    epoch_tokens: int = 0  # and target tokens
    epoch_seconds: float = 0.0
    epoch_norm_sum: float = 0.0  # the gradient norms of its finite steps, summed (rank 0's: every rank's are equal)
    epoch_norm_steps: int = 0  # and how many
    epoch_world: int = 1  # processes the epoch's batches were built for
    epoch_done: list = field(default_factory=list)  # [processes, batches] trained before the number changed

    @classmethod
    def from_dict(cls, saved: dict) -> Progress:
        """A checkpoint's progress; older checkpoints said ``stopped_early`` where the reason now stands."""
        saved = dict(saved)
        if saved.pop("stopped_early", False):
            saved.setdefault("stop_reason", "no dev BLEU gain (early stopping)")
        saved.setdefault("counted_bleu", saved.get("best_bleu", -1.0))  # a checkpoint from before they were apart
        saved.setdefault("counted_loss", saved.get("best_loss", math.inf))
        return cls(**saved)

    def note_validation(
        self, epoch: int, dev_bleu: float, cfg: TrainConfig, counts: bool = True, dev_loss: float = math.inf
    ) -> bool:
        """A validation inside (or at the end of) epoch ``epoch`` scored ``dev_bleu`` (and
        ``dev_loss``); whether it is the best so far: a higher BLEU, or the same BLEU at a lower
        loss. The tie-break matters on a tiny corpus, whose first epochs all score BLEU 0.00: by
        BLEU alone the first would stay the best, early stopping would end the run and the plateau
        schedule would lower the rate while the loss still falls. ``counts``: it counts towards
        early stopping's patience and the plateau schedule (not so a validation the time budget
        forced inside an epoch: a resumed run validates that epoch's end, and compares it with the
        best of the validations that count, as an uninterrupted run does)."""
        improved = _better(dev_bleu, dev_loss, self.best_bleu, self.best_loss)
        if improved:
            self.best_bleu, self.best_loss, self.best_epoch, self.best_step = dev_bleu, dev_loss, epoch, self.step
        if not counts:
            return improved
        gained = _better(dev_bleu, dev_loss, self.counted_bleu, self.counted_loss)
        if gained:
            self.counted_bleu, self.counted_loss = dev_bleu, dev_loss
        self.bad_epochs = 0 if gained else self.bad_epochs + 1
        if cfg.lr_schedule == "plateau":
            self.lr_stalled = 0 if gained else self.lr_stalled + 1
            if self.lr_stalled > cfg.lr_patience:  # as torch's ReduceLROnPlateau: after patience + 1 stalls
                self.lr_reductions, self.lr_stalled = self.lr_reductions + 1, 0
        return improved

    def finish_epoch(self, epoch: int, seconds: float) -> None:
        """Epoch ``epoch`` is complete (``seconds`` of training): nothing of it is unfinished any more."""
        self.epoch = epoch
        self.train_seconds += seconds
        self.batch_in_epoch, self.epoch_loss, self.epoch_tokens, self.epoch_seconds = 0, 0.0, 0, 0.0
        self.epoch_norm_sum, self.epoch_norm_steps = 0.0, 0
        self.epoch_done = []


def _better(bleu: float, loss: float, best_bleu: float, best_loss: float) -> bool:
    """A higher BLEU, or the same BLEU at a lower loss (by more than ``LOSS_TIE_BREAK``)."""
    return bleu > best_bleu or (bleu == best_bleu and loss < best_loss - LOSS_TIE_BREAK)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)


def rank_seed(seed: int, rank: int, step: int = 0) -> int:
    """A seed for rank ``rank``'s own random numbers, distinct for each (seed, rank, step)
    (rank 0 of a new run draws on from ``train.seed`` as one process does)."""
    return int(np.random.SeedSequence([seed, rank, step]).generate_state(1)[0])


def rng_state(device: torch.device) -> dict:
    """This process's random states: Python's, the CPU generator's and, on a GPU, the
    generator of the one GPU it trains on (not of every visible GPU: a resume may see fewer)."""
    state = {"python": random.getstate(), "torch": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    elif device.type == "mps":
        state["mps"] = torch.mps.get_rng_state()
    return state


def set_rng_state(saved: dict | list[dict], device: torch.device, seed: int, rank: int = 0, step: int = 0) -> None:
    """Restore what ``rng_state`` saved; ``saved`` is one state, or one per rank under DDP.
    A rank the checkpoint has no state for (a resume with more processes) draws a stream of
    its own from ``rank_seed(seed, rank, step)``: rank 0's again would repeat its dropout."""
    states = [saved] if isinstance(saved, dict) else saved
    if rank >= len(states):
        seed_everything(rank_seed(seed, rank, step))
        return
    state = states[rank]
    random.setstate(state["python"])
    torch.set_rng_state(state["torch"])
    cuda = state.get("cuda")
    if isinstance(cuda, list):  # older checkpoints: one state per visible GPU, by index
        cuda = cuda[min(device.index or 0, len(cuda) - 1)] if cuda else None
    if device.type == "cuda" and cuda is not None:
        torch.cuda.set_rng_state(cuda, device)
    if device.type == "mps" and "mps" in state:
        torch.mps.set_rng_state(state["mps"])


class TrainingInterrupted(NmtError):
    """A stop signal arrived; a checkpoint was saved."""


STOP_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)  # Ctrl-C; a scheduler's or torchrun's stop; a closed terminal or SSH session (no SIGHUP on Windows)


class StopFlag:
    """Set by SIGINT, SIGTERM or SIGHUP while training runs; the loop stops after the current
    step (or abandons a validation) and checkpoints."""

    def __init__(self):
        self.signal_name: str | None = None

    def __bool__(self) -> bool:
        return self.signal_name is not None

    @contextlib.contextmanager
    def installed(self):
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}

        def handler(signum, _frame):
            self.signal_name = signal.Signals(signum).name

        for sig in previous:
            signal.signal(sig, handler)
        try:
            yield self
        finally:
            for sig, old in previous.items():
                signal.signal(sig, old)
