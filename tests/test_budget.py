"""The wall-clock budget: stops within one step of it, keeps the best, and resumes exactly."""

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from typer.testing import CliRunner

from nmt.cli import app
from nmt.config.parsing import config_from_dict
from nmt.pipelines.prepare import prepare
from nmt.training import trainer as trainer_module
from nmt.training.control import TimeBudget
from nmt.training.metrics import MetricsFile
from nmt.training.trainer import Trainer, build_trainer

from .helpers import synthetic_pairs, tiny_config, write_anki

runner = CliRunner()


class StepClock:
    """A clock that moves one second per training step."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_time_budget_counts_earlier_sessions():
    clock = StepClock()
    budget = TimeBudget(1.0, spent_before=50.0, clock=clock)
    assert not budget.exhausted()
    clock.now = 9.9
    assert budget.spent() == 59.9 and not budget.exhausted()
    clock.now = 10.0
    assert budget.exhausted()
    assert not TimeBudget(0.0, spent_before=1e9, clock=clock).exhausted()  # 0 = no budget


def ticking_steps(monkeypatch) -> dict:
    """Make every training step move the clock in ``ticks["clock"]`` by one second."""
    ticks = {"clock": None}
    original_step = trainer_module.train_step

    def step_and_tick(*args, **kwargs):
        ticks["clock"].now += 1.0
        return original_step(*args, **kwargs)

    monkeypatch.setattr(trainer_module, "train_step", step_and_tick)
    return ticks


def make_trainer(tmp_path, ticks: dict, **train) -> Trainer:
    tmp_path.mkdir(exist_ok=True)
    data = write_anki(tmp_path / "pairs.txt", synthetic_pairs())
    raw = tiny_config(tmp_path, data, train={"epochs": 3, "batch_size": 16, **train}, model={"dropout": 0.2})
    config = config_from_dict(raw)
    prepare(config, log=lambda _: None)
    trainer = build_trainer(config, torch.device("cpu"), show_bar=False)
    trainer.control.clock = ticks["clock"] = StepClock()
    return trainer


def test_budget_stops_within_one_step_keeps_the_best_and_resumes_to_the_same_weights(tmp_path, monkeypatch):
    ticks = ticking_steps(monkeypatch)
    reference = make_trainer(tmp_path / "a", ticks)
    reference.run()
    steps_per_epoch = reference.progress.step // 3

    budgeted = make_trainer(tmp_path / "b", ticks, max_minutes=6 / 60)  # six steps' worth
    progress = budgeted.run()
    assert progress.step == 6 and progress.epoch == 0 and progress.batch_in_epoch == 6 < steps_per_epoch
    assert progress.best_epoch == 1 and progress.best_bleu >= 0  # the partial epoch was validated and kept
    run = budgeted.run_dir
    assert run.checkpoint("best").is_file() and run.checkpoint("last").is_file()
    assert MetricsFile(run.metrics).read()[-1]["partial"] is True
    assert "budget spent after 6 steps" in run.train_log.read_text(encoding="utf-8")

    resumed = make_trainer(tmp_path / "b", ticks, max_minutes=0)  # no budget now
    resumed.run(resume=True)
    assert resumed.progress.step == reference.progress.step and resumed.progress.epoch == 3
    for name, tensor in reference.model.state_dict().items():
        assert torch.equal(tensor, resumed.model.state_dict()[name]), name
    assert all("partial" not in r for r in MetricsFile(run.metrics).read())  # the partial record was replaced


def test_the_summary_counts_a_partial_epoch_in_the_training_time(tmp_path, monkeypatch):
    trainer = make_trainer(tmp_path, ticking_steps(monkeypatch), max_minutes=5)
    trainer.progress.epoch, trainer.progress.best_epoch, trainer.progress.best_bleu = 6, 7, 36.9
    trainer.progress.train_seconds = 256.0  # six whole epochs
    for epoch, seconds, partial in ((6, 256.0, {}), (7, 289.0, {"partial": True, "epochs": 6.5})):
        record = {"epoch": epoch, "step": 100 * epoch, "train_seconds": seconds, "dev_bleu": 36.9, "best": True}
        trainer.metrics.append({**record, **partial})
    trainer.log_summary("5-minute budget spent")
    told = "best dev BLEU 36.90 at epoch 6.50 (after 289 s of training); 6.50 epochs, 289 s of training, 2 validations"
    assert told in trainer.run_dir.train_log.read_text(encoding="utf-8")


def test_cli_minutes_stops_cleanly_and_resume_goes_on(tmp_path, config_file):
    result = runner.invoke(app, ["train", "--config", str(config_file), "--minutes", "0.0001"])
    assert result.exit_code == 0, result.output
    assert (
        "budget spent after" in result.output and "--resume --minutes M goes on, M counting the whole" in result.output
    )
    result = runner.invoke(app, ["train", "--config", str(config_file), "--minutes", "30", "--resume"])
    assert result.exit_code == 0, result.output
    assert "Resuming from" in result.output and "Training done (2 epochs)" in result.output


def test_a_resume_keeps_the_budget_the_run_was_started_with(tmp_path, config_file):
    """Started with --set train.max_minutes=..., a plain --resume keeps that budget (before, it
    trained on to the config file's); a resume with nothing to do says so (before: "Training
    done (0.5-minute budget spent...)")."""
    started = runner.invoke(app, ["train", "--config", str(config_file), "--set", "train.max_minutes=0.0001"])
    assert started.exit_code == 0 and "budget spent" in started.output, started.output
    last = tmp_path / "run" / "checkpoints" / "last.pt"
    steps = torch.load(last, weights_only=True)["progress"]["step"]
    resumed = runner.invoke(app, ["train", "--config", str(config_file), "--resume"])  # the file says no budget
    assert resumed.exit_code == 0, resumed.output
    assert "Resuming with the run's own train.max_minutes: 0.0001" in resumed.output
    assert "Nothing to train: the run had already ended" in resumed.output and "Training done" not in resumed.output
    assert torch.load(last, weights_only=True)["progress"]["step"] == steps  # nothing trained
    again = runner.invoke(app, ["train", "--config", str(config_file), "--resume", "--set", "train.max_minutes=0"])
    assert again.exit_code == 0 and "Training done (2 epochs)" in again.output, again.output


def record_rates(monkeypatch) -> list[float]:
    """The learning rate of every training step from now on (wraps whatever train_step is now)."""
    rates = []
    step = trainer_module.train_step

    def record_rate(model, batch, optimizer, *args, **kwargs):
        rates.append(optimizer.param_groups[0]["lr"])
        return step(model, batch, optimizer, *args, **kwargs)

    monkeypatch.setattr(trainer_module, "train_step", record_rate)
    return rates


def test_budget_schedule_decays_the_learning_rate_linearly_over_the_budget(tmp_path, monkeypatch):
    ticks = ticking_steps(monkeypatch)
    trainer = make_trainer(tmp_path, ticks, max_minutes=6 / 60, lr_schedule="budget", learning_rate=0.006)
    rates = record_rates(monkeypatch)
    trainer.run()
    assert rates == pytest.approx([0.006 * (1 - spent / 6) for spent in range(6)])  # the clock ticks once per step


def test_budget_schedule_holds_then_decays():
    from nmt.config.schema import TrainConfig
    from nmt.training.schedule import RunPosition, learning_rate

    cfg = TrainConfig(lr_schedule="budget", learning_rate=1.0, min_lr=0.01, lr_hold=0.5, max_minutes=1)
    spent = (0.0, 0.25, 0.5, 0.75, 0.99, 1.0, 2.0)  # of the budget
    rates = [learning_rate(cfg, RunPosition(1, 1, 10, seconds_spent=60 * share)) for share in spent]
    assert rates == pytest.approx([1.0, 1.0, 1.0, 0.5, 0.02, 0.01, 0.01])


def test_budget_schedule_without_a_time_budget_decays_over_the_epochs(tmp_path, monkeypatch):
    trainer = make_trainer(tmp_path, ticking_steps(monkeypatch), lr_schedule="budget", lr_hold=0.5, epochs=2)
    rates = record_rates(monkeypatch)
    trainer.run()
    base, total = trainer.config.train.learning_rate, len(rates)  # two epochs of equal length
    expected = [base * min(1.0, 1.0 - (k / total - 0.5) / 0.5) for k in range(total)]
    assert rates == pytest.approx(expected) and rates[-1] < base / total * 2.01


@pytest.mark.parametrize(("patience", "stop_epoch"), [(2, 4), (1, 3), (0, None)])
def test_early_stopping_counts_epochs_without_a_better_dev_bleu_and_zero_turns_it_off(patience, stop_epoch):
    from nmt.config.schema import TrainConfig
    from nmt.training.callbacks import EarlyStopping
    from nmt.training.state import Progress

    progress, stopped, stopping = Progress(), None, EarlyStopping(patience)
    trainer = SimpleNamespace(progress=progress)
    for epoch, bleu in enumerate([10.0, 12.0, 11.0, 12.0, 9.0, 8.0], start=1):  # best at 2; a tie is no gain
        progress.note_validation(epoch, bleu, TrainConfig(patience=patience))
        if stopping.after_validation(trainer, {"dev_bleu": bleu}) and stopped is None:
            stopped = epoch
    assert stopped == stop_epoch


def test_a_budget_without_a_clock_of_its_own_reads_the_monotonic_clock():
    budget = TimeBudget(1.0)  # the clock argument is optional
    assert 0.0 <= budget.spent() < 5.0 and not budget.exhausted()


def test_at_an_equal_dev_bleu_a_lower_dev_loss_is_progress():
    """A tiny corpus scores BLEU 0.00 for its first epochs while the loss falls: by BLEU alone
    the first validation stayed the best, early stopping ended the run at patience + 1 and the
    plateau schedule lowered the rate (seen on an H100 and a CPU alike: every translation of
    the best checkpoint was empty)."""
    from nmt.config.schema import TrainConfig
    from nmt.training.callbacks import EarlyStopping
    from nmt.training.state import Progress

    cfg = TrainConfig(patience=2, lr_schedule="plateau", lr_patience=0)
    progress, stopping = Progress(), EarlyStopping(cfg.patience)
    trainer = SimpleNamespace(progress=progress)
    history = [(0.0, 4.4), (0.0, 3.3), (0.0, 2.6), (0.0, 2.2), (3.5, 1.6), (3.5, 1.7), (3.5, 1.8)]
    improved = []
    for epoch, (bleu, loss) in enumerate(history, start=1):
        improved.append(progress.note_validation(epoch, bleu, cfg, dev_loss=loss))
        assert not stopping.after_validation(trainer, {"dev_bleu": bleu}) or epoch == len(history), epoch
    assert improved == [True, True, True, True, True, False, False]
    assert (progress.best_epoch, progress.best_bleu, progress.best_loss) == (5, 3.5, 1.6)
    assert progress.lr_reductions == 2  # one for each validation after the best (lr_patience 0), none before


def test_the_timeline_keeps_the_budgets_last_validation_and_a_resume_replaces_it(tmp_path, monkeypatch):
    """The budget-end validation (the kept best, here) had no timeline record: timeline.jsonl held
    fewer lines than metrics.jsonl, and the lab's "alignment forming" missed the last point."""
    ticks = ticking_steps(monkeypatch)
    budgeted = make_trainer(tmp_path / "b", ticks, max_minutes=6 / 60, probes=2)
    budgeted.run()
    run = budgeted.run_dir
    metrics, timeline = MetricsFile(run.metrics).read(), MetricsFile(run.timeline).read()
    assert metrics[-1]["partial"] is True and [r["epoch"] for r in timeline] == [r["epoch"] for r in metrics]
    resumed = make_trainer(tmp_path / "b", ticks, max_minutes=0, probes=2)
    resumed.run(resume=True)
    metrics, timeline = MetricsFile(run.metrics).read(), MetricsFile(run.timeline).read()
    assert [r["epoch"] for r in timeline] == [r["epoch"] for r in metrics] == [1, 2, 3]


def test_the_validation_estimate_counts_outputs_at_the_references_length(monkeypatch):
    """Timed on the untrained model (outputs to the length limit) the estimate read 3.7 minutes
    where the run's validations took 15 s: a decoding step costs one tick here, and a model that
    runs to the limit is estimated as one that stops at the references' length."""
    from nmt.data.batching import Example
    from nmt.decoding.search import Hypothesis
    from nmt.training import validate

    clock = StepClock()
    monkeypatch.setattr(validate.time, "perf_counter", lambda: clock.now)
    monkeypatch.setattr(validate, "dev_loss_sums", lambda *a, **k: None)
    data = SimpleNamespace(dev=[Example([4, 5], [4, 5, 6, 7])] * 10, dev_sources=[[4, 5]] * 10)
    config = config_from_dict(tiny_config(Path("unused"), Path("pairs.tsv")))
    estimates = []
    for length in (4, 40):  # what a trained model writes, and what an untrained one does

        def search(model, sources, decode, device, length=length):
            clock.now += len(sources) * (length + 1)  # one tick a step
            return [[Hypothesis([4] * length, [0.0] * (length + 1), 0.0)] for _ in sources]

        monkeypatch.setattr(validate, "search_sentences", search)
        estimates.append(validate.validation_seconds(None, data, config, torch.device("cpu")))
    assert estimates[0] == estimates[1] == 10 * 5
