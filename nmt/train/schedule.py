"""What changes as a run goes on, as pure functions of where it is: the same position gives
the same settings, in a resumed run too. The training loop calls ``step_settings`` once per
step and ``epoch_seeds`` once per epoch; nothing else decides these.

* the learning rate of ``train.lr_schedule: budget``: a function of the share of the run spent
  (of train.epochs, or of the time budget, whichever is further along). The plateau schedule
  is not one: it follows dev BLEU and steps at validation (``ReduceLROnPlateau``);
* word dropout: ``train.word_dropout`` at every step;
* subword sampling: each epoch's segmentation seeds, from (train.seed, epoch).
"""

from __future__ import annotations

from dataclasses import dataclass

from nmt.config import TrainConfig
from nmt.train.optim import budget_learning_rate


@dataclass(frozen=True)
class RunPosition:
    epoch: int  # 1-based
    batch: int  # 1-based, within the epoch
    epoch_length: int  # batches in the epoch
    seconds_spent: float = 0.0  # of the time budget (train.max_minutes), earlier sessions included

    def share_spent(self, cfg: TrainConfig) -> float:
        """The share of the run spent before this batch: of train.epochs, or of the time
        budget, whichever is further along."""
        share = (self.epoch - 1 + (self.batch - 1) / max(1, self.epoch_length)) / cfg.epochs
        if cfg.max_minutes:
            share = max(share, self.seconds_spent / (cfg.max_minutes * 60.0))
        return share


@dataclass(frozen=True)
class StepSettings:
    learning_rate: float | None  # None: the plateau schedule owns it
    word_dropout: float  # probability of replacing an input token by <unk>


def step_settings(cfg: TrainConfig, position: RunPosition) -> StepSettings:
    """The settings of the step at ``position``."""
    learning_rate = None
    if cfg.lr_schedule == "budget":
        learning_rate = budget_learning_rate(cfg.learning_rate, cfg.min_lr, position.share_spent(cfg), cfg.lr_hold)
    return StepSettings(learning_rate, cfg.word_dropout)


def epoch_seeds(cfg: TrainConfig, epoch: int) -> tuple[int, int]:
    """The seeds of ``epoch``'s subword sampling, (source, target)."""
    seed = cfg.seed * 1000 + epoch
    return seed, seed + 500
