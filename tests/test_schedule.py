"""The schedules are pure functions of the run's position (nmt/training/schedule.py)."""

import pytest
import torch

from nmt.config.schema import TrainConfig
from nmt.training.schedule import RunPosition, epoch_seeds, learning_rate, step_settings
from nmt.training.state import Progress


def test_the_same_position_gives_the_same_settings():
    budget = TrainConfig(lr_schedule="budget", epochs=4, learning_rate=1.0, min_lr=0.0, word_dropout=0.1)
    position = RunPosition(epoch=2, batch=6, epoch_length=10)
    assert step_settings(budget, position) == step_settings(budget, RunPosition(2, 6, 10))
    assert step_settings(budget, position).word_dropout == 0.1


def test_the_plateau_rate_is_a_function_of_the_reductions_so_far():
    cfg = TrainConfig(lr_schedule="plateau", learning_rate=0.004, lr_factor=0.5, min_lr=0.0006)
    rates = [learning_rate(cfg, RunPosition(3, 1, 10, lr_reductions=k)) for k in range(5)]
    assert rates == pytest.approx([0.004, 0.002, 0.001, 0.0006, 0.0006])  # never below min_lr


@pytest.mark.parametrize("lr_patience", [0, 1, 2])
def test_the_plateau_schedule_lowers_the_rate_when_torchs_reduce_on_plateau_would(lr_patience):
    """The rule that replaced torch's ReduceLROnPlateau (one function of the run's position
    instead of a second mechanism) lowers the rate at the same validations."""
    cfg = TrainConfig(lr_schedule="plateau", learning_rate=0.01, lr_factor=0.5, lr_patience=lr_patience, min_lr=1e-4)
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=cfg.learning_rate)
    torchs = torch.optim.lr_scheduler.ReduceLROnPlateau(
        optimizer, mode="max", factor=cfg.lr_factor, patience=lr_patience, min_lr=cfg.min_lr
    )
    progress = Progress()
    for validation, bleu in enumerate([5.0, 7.0, 7.0, 6.0, 8.0, 8.0, 8.0, 8.0, 9.0, 3.0, 3.0, 3.0], start=1):
        torchs.step(bleu)
        progress.note_validation(validation, bleu, cfg)
        ours = learning_rate(cfg, RunPosition(validation + 1, 1, 10, lr_reductions=progress.lr_reductions))
        assert ours == pytest.approx(optimizer.param_groups[0]["lr"], rel=1e-12), validation


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


def test_a_partial_validation_leaves_patience_and_the_plateau_as_an_uninterrupted_run_has_them():
    """Before: a budget's partial validation (BLEU 6 inside epoch 2) raised the best the epoch's
    end was compared with, so the resumed run counted a stall the uninterrupted one did not, and
    lowered its rate at another step (its weights differed)."""
    cfg = TrainConfig(lr_schedule="plateau", lr_patience=0, patience=5)
    uninterrupted, resumed = Progress(), Progress()
    for epoch, bleu in ((1, 4.0), (2, 5.0)):
        uninterrupted.note_validation(epoch, bleu, cfg)
    resumed.note_validation(1, 4.0, cfg)
    assert resumed.note_validation(2, 6.0, cfg, counts=False)  # the best checkpoint: still the best
    resumed.note_validation(2, 5.0, cfg)
    assert (resumed.bad_epochs, resumed.lr_stalled, resumed.lr_reductions) == (0, 0, 0)
    assert (resumed.bad_epochs, resumed.lr_reductions) == (uninterrupted.bad_epochs, uninterrupted.lr_reductions)
    assert resumed.best_bleu == 6.0 and resumed.best_epoch == 2
