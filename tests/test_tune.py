"""nmt tune: a study of short trials, pruned, resumable, shared by workers; its errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml
from typer.testing import CliRunner

from nmt.cli import app
from nmt.config.files import load_config
from nmt.core.errors import NmtError
from nmt.training.state import TrainingInterrupted

from .helpers import synthetic_pairs, tiny_config, write_anki

optuna = pytest.importorskip("optuna")  # the test command installs it (the tune extra)
tune_module = pytest.importorskip("nmt.pipelines.tune")
runner = CliRunner()
SPACE = {"model.dropout": {"low": 0.0, "high": 0.3}, "train.learning_rate": {"choices": [0.03, 1e-7]}}


def study_config(tmp_path: Path, trials: int = 4, **tune) -> Path:
    data = write_anki(tmp_path / "pairs.tsv", synthetic_pairs())
    train = {"epochs": 4, "max_minutes": 2.0, "learning_rate": 0.03}  # trial 0, the config's own, learns
    raw = tiny_config(tmp_path, data, run_dir=str(tmp_path / "run"), train=train)
    raw["decode"].update(max_len_ratio=1.2, max_len_offset=2)  # an untrained model's validation ends soon
    raw["tune"] = {"trials": trials, "confirm": 1, "seeds": [1], "workers": 1, "space": SPACE, **tune}
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return path


def trials_of(tmp_path: Path):
    storage = optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(tmp_path / "run" / "tune" / "study.journal"))
    )
    return optuna.load_study(study_name="run", storage=storage).get_trials()


@pytest.mark.slow
def test_a_tiny_study_prunes_and_writes_a_tuned_config_that_trains(tmp_path):
    config = study_config(tmp_path, trials=6)
    result = runner.invoke(app, ["tune", "--config", str(config)])
    assert result.exit_code == 0, result.output
    trials = trials_of(tmp_path)
    states = [t.state.name for t in trials]
    assert len(trials) == 6 and "PRUNED" in states and "COMPLETE" in states
    pruned = next(t for t in trials if t.state.name == "PRUNED")
    assert pruned.params["train.learning_rate"] == 1e-7
    steps = sorted(pruned.intermediate_values)  # percent of its run at each validation
    assert tune_module.PRUNE_AFTER <= steps[-1] < 100  # stopped early, but not on its first, noisy validations
    assert "trial 5 (6/6)" in result.output and "best" in result.output  # a progress line per trial
    assert trials[0].user_attrs["starting"] and trials[0].params["model.dropout"] == 0.0  # the config as it is
    assert (tmp_path / "run" / "tune" / "confirm-trial-0-seed1").is_dir()  # confirmed beside the best
    tuned = tmp_path / "run" / "tune" / "tuned.yaml"
    text = tuned.read_text(encoding="utf-8")
    assert text.startswith("# Found by `nmt tune`") and "learning_rate: 0.03" in text
    report = (tmp_path / "run" / "tune" / "report.md").read_text(encoding="utf-8")
    assert report.count("| pruned |") == states.count("PRUNED") and "Confirmed at the full budget" in report
    assert (tmp_path / "run" / "tune" / "history.png").is_file()
    trained = runner.invoke(app, ["train", "--config", str(tuned), "--set", f"run_dir={tmp_path / 'tuned-run'}"])
    assert trained.exit_code == 0, trained.output


def test_a_study_that_finds_nothing_better_keeps_the_configs_own_recipe(tmp_path, monkeypatch):
    """Trial 0 is the config as it is, and it is confirmed at the full budget beside the best
    trial even when the short trials rank it low: if it wins there, tuned.yaml keeps its values."""
    config = load_config(study_config(tmp_path, trials=4), [])
    start = tune_module.starting_values(config, tune_module.parse_space(SPACE, config))
    assert start == {"model.dropout": 0.0, "train.learning_rate": 0.03}
    config.train.learning_rate = 0.001  # a value the space does not hold is left to the sampler
    assert tune_module.starting_values(config, tune_module.parse_space(SPACE, config)) == {"model.dropout": 0.0}

    def fake_train_run(study, values, run_dir, minutes, seed, threads, callback=None):
        own = values.get("model.dropout") == 0.0
        full = minutes == study.minutes
        best = (20.0 if own else 10.0) if full else (1.0 if own else 5.0)  # last in the trials, first in full
        record = {"epoch": 1, "dev_bleu": best, "elapsed_seconds": 1.0, "tokens_per_s": 100.0}
        return best, [record]

    monkeypatch.setattr(tune_module, "train_run", fake_train_run)
    monkeypatch.setattr(tune_module, "_save_plot", lambda *args: False)
    logged = []
    tuned = tune_module.tune(config, torch.device("cpu"), space=SPACE, log=logged.append)
    text = tuned.read_text(encoding="utf-8")
    assert "The config's own recipe won" in text and "dropout: 0.0" in text
    assert any("confirmed best: tuned.yaml keeps its values" in line for line in logged)


def test_a_trial_is_placed_by_the_share_of_its_time_or_epochs_it_has_used():
    position = tune_module.run_position
    assert position({"elapsed_seconds": 30, "epoch": 1}, trial_minutes=2, epochs=100) == 20  # by time, in tenths
    assert position({"elapsed_seconds": 6, "epoch": 3}, trial_minutes=2, epochs=4) == 70  # by epochs
    assert position({"elapsed_seconds": 200, "epoch": 9}, trial_minutes=2, epochs=100) == 100


@pytest.mark.slow
def test_an_interrupted_study_goes_on_without_repeating_finished_trials(tmp_path, monkeypatch):
    config = load_config(study_config(tmp_path, trials=3, confirm=0), [])
    real = tune_module.train_run
    calls: list[str] = []

    def interrupted_second(study, values, run_dir, *args, **kwargs):
        calls.append(Path(run_dir).name)
        if calls == ["trial-0", "trial-1"]:  # as Ctrl-C in the second trial would
            raise TrainingInterrupted("Training stopped by SIGINT at epoch 1, step 3.")
        return real(study, values, run_dir, *args, **kwargs)

    monkeypatch.setattr(tune_module, "train_run", interrupted_second)
    with pytest.raises(TrainingInterrupted):
        tune_module.tune(config, torch.device("cpu"), log=lambda _: None)
    assert [t.state.name for t in trials_of(tmp_path)] == ["COMPLETE", "FAIL"]
    calls.clear()
    tune_module.tune(config, torch.device("cpu"), log=lambda _: None)
    trials = trials_of(tmp_path)
    assert "trial-0" not in calls and calls[0] == "trial-1"  # the finished one stays; the stopped one goes on
    assert sum(t.state.name in ("COMPLETE", "PRUNED") for t in trials) == 3
    assert (tmp_path / "run" / "tune" / "tuned.yaml").is_file()


@pytest.mark.slow
def test_two_workers_share_one_study(tmp_path):
    config = study_config(tmp_path, trials=4, workers=2, confirm=0)
    result = runner.invoke(app, ["tune", "--config", str(config)])
    assert result.exit_code == 0, result.output
    trials = trials_of(tmp_path)
    assert sorted(t.number for t in trials) == [0, 1, 2, 3]  # one study, not one each
    assert len({t.params["model.dropout"] for t in trials}) == 4  # each worker its own proposals
    assert sum(t.state.name in ("COMPLETE", "PRUNED") for t in trials) == 4
    assert "2 at once with 1 thread(s) each" in result.output


@pytest.mark.parametrize(
    ("space", "message"),
    [
        ({"model.dropuot": {"low": 0.1, "high": 0.3}}, "'model.dropuot' is not a config key. Did you mean model.drop"),
        ({"model.dropout": {"low": 0.5, "high": 0.1}}, r"the range \[0.5, 0.1\] is empty or inverted"),
        ({"model.attention": {"choices": []}}, "choices must be a non-empty list"),
        ({"model.attention": {"choices": ["luong-cat"]}}, "model.attention"),
        ({"train.learning_rate": {"low": 0, "high": 0.1, "log": True}}, "a log range needs low > 0"),
        ({"model.dropout": [0.1, 0.3]}, r"expected \{low: x, high: y"),
    ],
)
def test_search_space_mistakes_are_named_before_anything_trains(tmp_path, space, message):
    config = load_config(study_config(tmp_path), [])
    with pytest.raises(NmtError, match=message):
        tune_module.tune(config, torch.device("cpu"), space=space, log=lambda _: None)
    assert not (tmp_path / "run" / "tune").exists()


def test_a_budget_too_short_for_a_validation_is_refused(tmp_path):
    config = load_config(study_config(tmp_path), ["train.max_minutes=1", "tune.trial_fraction=0.3"])
    with pytest.raises(NmtError, match=r"0\.30 minutes, too short for an epoch and a validation"):
        tune_module.tune(config, torch.device("cpu"), log=lambda _: None)
    result = runner.invoke(app, ["tune", "--config", str(study_config(tmp_path)), "--minutes", "0"])
    assert result.exit_code == 1 and "set train.max_minutes" in result.output and "Traceback" not in result.output


def test_the_documented_search_spaces_are_valid():
    """docs/tuning.md's worked example and the default space both pass the checks."""
    root = Path(__file__).resolve().parents[1]
    config = load_config(root / "configs" / "eng-hin-scratch.yaml")
    example = yaml.safe_load((root / "docs" / "tuning" / "space.yaml").read_text(encoding="utf-8"))
    assert [p.key for p in tune_module.parse_space(example, config)] == list(example)
    space = tune_module.default_space()
    assert len(tune_module.parse_space(space, config)) == len(space)
    assert space["model.attention"] == {"choices": ["bahdanau", "luong-general", "luong-concat"]}


def test_the_default_space_takes_every_registered_soft_attention(monkeypatch):
    from nmt.core.registry import ATTENTIONS
    from nmt.model.rnn.attention import SOFT, AttentionKind, DotAttention

    kind = AttentionKind(lambda c, q, e, w: DotAttention(w), "recur-then-attend", ("e_j = q · h_j", *SOFT))
    monkeypatch.setitem(ATTENTIONS, "plugged-in", kind)  # as a plugin registers one
    assert tune_module.default_space()["model.attention"]["choices"][-1] == "plugged-in"
