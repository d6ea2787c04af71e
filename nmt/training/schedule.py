"""What changes as a run goes on, as pure functions of where it is: the same position gives
the same settings, in a resumed run too. The training loop calls ``step_settings`` once per
step and ``epoch_seeds`` once per epoch; nothing else decides these.

* the learning rate: ``learning_rate``, the one function that sets it (as nanoGPT's
  ``get_lr``). ``train.lr_schedule: budget`` makes it a function of the share of the run spent;
  ``plateau`` of the number of times dev BLEU has stalled so far (``Progress.note_validation``
  counts them: part of where the run is); ``inverse_sqrt`` of the step; ``train.lr_warmup``
  ramps any of them up over the run's first steps;
* word dropout: ``train.word_dropout`` at every step;
* subword sampling, joined pairs and the related pairs drawn: each epoch's seeds, from
  (train.seed, epoch).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from nmt.config.schema import TrainConfig


@dataclass(frozen=True)
class RunPosition:
    epoch: int  # 1-based
    batch: int  # 1-based, within the epoch
    epoch_length: int  # batches in the epoch
    seconds_spent: float = 0.0  # of the time budget (train.max_minutes), earlier sessions included
    lr_reductions: int = 0  # times the plateau schedule has lowered the learning rate so far
    step: int = 0  # updates done before this batch, earlier sessions included

    def share_spent(self, cfg: TrainConfig) -> float:
        """The share of the run spent before this batch: of train.epochs, or of the time
        budget, whichever is further along."""
        share = (self.epoch - 1 + (self.batch - 1) / max(1, self.epoch_length)) / cfg.epochs
        if cfg.max_minutes:
            share = max(share, self.seconds_spent / (cfg.max_minutes * 60.0))
        return share


def learning_rate(cfg: TrainConfig, position: RunPosition) -> float:
    """The learning rate of the step at ``position``: the schedule's, times the warm-up's ramp.

    * ``budget``: ``train.learning_rate`` for the first ``train.lr_hold`` of the run, then a
      linear fall to ``train.min_lr`` at its end (linear decay suits a known budget best among
      the schedules compared by Li et al., 2020, "Budgeted Training");
    * ``plateau``: ``train.learning_rate`` times ``train.lr_factor`` for each time dev BLEU
      stalled for more than ``train.lr_patience`` validations, never below ``train.min_lr``;
    * ``inverse_sqrt`` (Vaswani et al., 2017): ``train.learning_rate`` at the end of the warm-up,
      then falling as 1/√step: lr · √(warmup / step).

    ``train.lr_warmup`` > 0: the first that many steps rise linearly from lr / warmup to lr
    (a Transformer's attention does not train from a full step at the start).
    """
    step = position.step + 1  # this update's number, 1-based
    warmup = cfg.lr_warmup
    ramp = min(1.0, step / warmup) if warmup else 1.0
    if cfg.lr_schedule == "budget":
        decayed = (min(1.0, position.share_spent(cfg)) - cfg.lr_hold) / (1.0 - cfg.lr_hold)
        return ramp * max(cfg.min_lr, cfg.learning_rate * (1.0 - max(0.0, decayed)))
    if cfg.lr_schedule == "inverse_sqrt":
        return ramp * cfg.learning_rate * math.sqrt(max(1, warmup) / max(step, warmup, 1))
    return ramp * max(cfg.min_lr, cfg.learning_rate * cfg.lr_factor**position.lr_reductions)


@dataclass(frozen=True)
class StepSettings:
    learning_rate: float
    word_dropout: float  # probability of replacing an input token by <unk>


def step_settings(cfg: TrainConfig, position: RunPosition) -> StepSettings:
    """The settings of the step at ``position``."""
    return StepSettings(learning_rate(cfg, position), cfg.word_dropout)


def epoch_seeds(cfg: TrainConfig, epoch: int) -> tuple[int, int]:
    """The seeds of ``epoch``'s subword sampling, (source, target)."""
    seed = cfg.seed * 1000 + epoch
    return seed, seed + 500


def related_seed(cfg: TrainConfig, epoch: int) -> int:
    """The seed of ``epoch``'s draw of related pairs (train.related_per_epoch)."""
    return cfg.seed * 1000 + epoch + 750
