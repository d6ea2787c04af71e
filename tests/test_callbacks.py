"""The Trainer's callbacks, run control and validation every N steps (nmt/train/callbacks.py,
nmt/train/control.py)."""

from __future__ import annotations

import pytest
import torch

from nmt.config import TrainConfig, config_from_dict
from nmt.prepare import prepare
from nmt.train import trainer as trainer_module
from nmt.train.callbacks import Callback, EarlyStopping, MetricsLog
from nmt.train.metrics import MetricsFile, epochs_trained
from nmt.train.state import Progress, TrainingInterrupted
from nmt.train.trainer import build_trainer, plateau_position

from .helpers import synthetic_pairs, tiny_config, write_anki


def trainer_of(tmp_path, **train):
    tmp_path.mkdir(exist_ok=True)
    raw = tiny_config(tmp_path, write_anki(tmp_path / "p.txt", synthetic_pairs()), train={"epochs": 2, **train})
    config = config_from_dict(raw)
    prepare(config, log=lambda _: None)
    return build_trainer(config, torch.device("cpu"), show_bar=False)


class Recorder(Callback):
    """Keeps every record it is told of; asks to stop at validation ``stop_at`` (1-based)."""

    def __init__(self, stop_at: int = 0):
        self.records: list[dict] = []
        self.stop_at = stop_at
        self.closed = False

    def after_validation(self, trainer, record):
        self.records.append(record)
        return "enough" if len(self.records) == self.stop_at else None

    def close(self):
        self.closed = True


def test_the_standard_callbacks_follow_the_config(tmp_path):
    trainer = trainer_of(tmp_path, patience=3, probes=0)
    kinds = [type(callback) for callback in trainer.callbacks]
    assert kinds == [MetricsLog, EarlyStopping]
    assert [type(c).__name__ for c in trainer_of(tmp_path / "b", patience=0).callbacks] == [
        "MetricsLog",
        "ProbeTimeline",
    ]


def test_a_callback_sees_every_validation_and_its_reason_ends_the_run(tmp_path):
    trainer = trainer_of(tmp_path, epochs=4)
    recorder = Recorder(stop_at=2)
    trainer.callbacks.append(recorder)
    progress = trainer.run()
    assert [r["epoch"] for r in recorder.records] == [1, 2] and recorder.closed
    assert recorder.records == MetricsFile(trainer.run_dir.metrics).read()  # the same records metrics.jsonl keeps
    assert progress.epoch == 2 and progress.stop_reason == "enough"
    assert "Training done (enough)" in trainer.run_dir.train_log.read_text(encoding="utf-8")
    again = trainer_of(tmp_path, epochs=4)  # resumed: the run is over, for the same reason
    again.run(resume=True)
    assert again.progress.step == progress.step and again.progress.stop_reason == "enough"


def test_validation_every_n_steps_records_fractional_epochs_and_counts_training_time_only(tmp_path):
    reference = trainer_of(tmp_path / "a", epochs=1, lr_schedule="budget")  # the plateau rate would count them
    reference.run()
    steps = reference.progress.step
    every = steps // 3  # three validations inside the epoch, then its end
    trainer = trainer_of(tmp_path / "b", epochs=1, lr_schedule="budget", validate_every=every)
    progress = trainer.run()
    records = MetricsFile(trainer.run_dir.metrics).read()
    inside = [r for r in records if r.get("mid_epoch")]
    assert [r["step"] for r in inside] == [every * k for k in range(1, 4) if every * k < steps]
    assert [epochs_trained(r) for r in inside] == [round(r["step"] / steps, 4) for r in inside]
    assert records[-1]["step"] == steps and "mid_epoch" not in records[-1] and epochs_trained(records[-1]) == 1
    assert all(r["train_seconds"] <= records[-1]["train_seconds"] for r in records)
    assert progress.step == steps and progress.epoch == 1
    for name, tensor in reference.model.state_dict().items():  # validating changes nothing the training draws
        assert torch.equal(tensor, trainer.model.state_dict()[name]), name
    log = trainer.run_dir.train_log.read_text(encoding="utf-8")
    assert f"epoch {epochs_trained(inside[0]):5.2f}  train loss" in log
    assert [r["epoch"] for r in trainer.timeline.read()] == [1]  # the lab's timeline stays one entry per epoch


def test_a_stop_at_a_validation_inside_an_epoch_ends_the_run_there(tmp_path):
    trainer = trainer_of(tmp_path, epochs=3, validate_every=2)
    trainer.callbacks.append(Recorder(stop_at=2))
    progress = trainer.run()
    assert progress.step == 4 and progress.epoch == 0 and progress.batch_in_epoch == 4
    assert [r["step"] for r in MetricsFile(trainer.run_dir.metrics).read()] == [2, 4]
    saved = torch.load(trainer.run_dir.checkpoint("last"), weights_only=False)
    assert saved["progress"]["step"] == 4 and saved["progress"]["stop_reason"] == "enough"


def test_a_resume_keeps_the_validations_inside_the_epoch_its_checkpoint_includes(tmp_path, monkeypatch):
    trainer = trainer_of(tmp_path, epochs=1, validate_every=2)
    train_batch = trainer_module.Trainer.train_batch

    def signalled_at_step_5(self, *args):
        if self.progress.step == 4:  # the 5th step is its last
            self.control.signal.signal_name = "SIGTERM"
        return train_batch(self, *args)

    monkeypatch.setattr(trainer_module.Trainer, "train_batch", signalled_at_step_5)
    with pytest.raises(TrainingInterrupted):
        trainer.run()
    monkeypatch.undo()
    MetricsFile(trainer.run_dir.metrics).append({"epoch": 1, "step": 6, "dev_bleu": 0.0})  # after the checkpoint
    resumed = trainer_of(tmp_path, epochs=1, validate_every=2)
    resumed.run(resume=True)
    steps = [r["step"] for r in MetricsFile(resumed.run_dir.metrics).read()]
    assert steps[:3] == [2, 4, 6] and steps == sorted(set(steps))  # 2 and 4 kept, the stray 6 made again once


def test_early_stopping_counts_validations_inside_epochs_too(tmp_path):
    trainer = trainer_of(tmp_path, epochs=50, validate_every=1, patience=2, learning_rate=1e-9)  # nothing improves
    progress = trainer.run()
    assert progress.stop_reason == "no dev BLEU gain in 2 validations"
    assert progress.step == 3 and progress.epoch == 0  # best at the first validation, two more without a gain


def test_a_checkpoint_from_torchs_plateau_scheduler_resumes_at_the_same_rate():
    cfg = TrainConfig(learning_rate=0.004, lr_factor=0.5, min_lr=1e-5)
    state = {"_last_lr": [0.001], "num_bad_epochs": 1, "best": 20.0}  # what ReduceLROnPlateau saved
    assert plateau_position(state, cfg) == (2, 1)
    assert plateau_position({"_last_lr": [0.004]}, cfg) == (0, 0)
    old = Progress.from_dict({"epoch": 3, "stopped_early": True, "bad_epochs": 5})
    assert old.stop_reason and old.epoch == 3
