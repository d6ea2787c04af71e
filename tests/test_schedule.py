"""The schedules are pure functions of the run's position (nmt/train/schedule.py)."""

import pytest

from nmt.config import TrainConfig
from nmt.train.schedule import RunPosition, epoch_seeds, step_settings


def test_the_same_position_gives_the_same_settings_and_plateau_leaves_the_rate_alone():
    budget = TrainConfig(lr_schedule="budget", epochs=4, learning_rate=1.0, min_lr=0.0, word_dropout=0.1)
    position = RunPosition(epoch=2, batch=6, epoch_length=10)
    assert step_settings(budget, position) == step_settings(budget, RunPosition(2, 6, 10))
    assert step_settings(budget, position).word_dropout == 0.1
    assert step_settings(TrainConfig(lr_schedule="plateau"), position).learning_rate is None


def test_the_budget_rate_falls_with_the_share_of_epochs_or_time_whichever_is_further():
    cfg = TrainConfig(lr_schedule="budget", epochs=4, learning_rate=1.0, min_lr=0.0)
    assert RunPosition(1, 1, 10).share_spent(cfg) == 0.0
    assert RunPosition(3, 6, 10).share_spent(cfg) == pytest.approx((2 + 0.5) / 4)
    rates = [step_settings(cfg, RunPosition(epoch, 1, 10)).learning_rate for epoch in (1, 2, 3, 4)]
    assert rates == pytest.approx([1.0, 0.75, 0.5, 0.25])
    timed = TrainConfig(lr_schedule="budget", epochs=100, max_minutes=1.0, learning_rate=1.0, min_lr=0.0)
    assert step_settings(timed, RunPosition(1, 2, 10, seconds_spent=45.0)).learning_rate == pytest.approx(0.25)


def test_each_epoch_samples_with_its_own_seeds():
    cfg = TrainConfig(seed=7)
    assert epoch_seeds(cfg, 3) == epoch_seeds(cfg, 3) != epoch_seeds(cfg, 4)
    source, target = epoch_seeds(cfg, 3)
    assert source != target
