"""The Trainer's callbacks, run control and validation every N steps (nmt/training/callbacks.py,
nmt/training/control.py)."""

from __future__ import annotations

import pytest
import torch

from nmt.config.parsing import config_from_dict
from nmt.config.schema import TrainConfig
from nmt.core.errors import NmtError
from nmt.pipelines.prepare import prepare
from nmt.training import trainer as trainer_module
from nmt.training.callbacks import Callback, EarlyStopping, MetricsLog
from nmt.training.metrics import MetricsFile, ValidationRecord, epochs_trained
from nmt.training.state import Progress, TrainingInterrupted
from nmt.training.trainer import build_trainer, plateau_position

from .helpers import synthetic_pairs, tiny_config, write_anki


def trainer_of(tmp_path, callbacks=(), **train):
    tmp_path.mkdir(exist_ok=True)
    raw = tiny_config(tmp_path, write_anki(tmp_path / "p.txt", synthetic_pairs()), train={"epochs": 2, **train})
    config = config_from_dict(raw)
    prepare(config, log=lambda _: None)
    return build_trainer(config, torch.device("cpu"), show_bar=False, callbacks=callbacks)


class Recorder(Callback):
    """Keeps every hook it is told of; asks to stop at validation ``stop_at`` (1-based)."""

    every_steps = 2

    def __init__(self, stop_at: int = 0):
        self.records: list[ValidationRecord] = []
        self.stop_at = stop_at
        self.events: list[tuple] = []

    def on_start(self, trainer, resumed):
        self.events.append(("start", resumed, trainer.progress.step))

    def after_step(self, trainer, step):
        self.events.append(("step", step))

    def after_validation(self, trainer, record):
        self.records.append(record)
        self.events.append(("validation", record.step))
        return "enough" if len(self.records) == self.stop_at else None

    def on_end(self, trainer, reason):
        self.events.append(("end", reason))


def test_the_standard_callbacks_follow_the_config(tmp_path):
    trainer = trainer_of(tmp_path, patience=3, probes=0)
    kinds = [type(callback) for callback in trainer.callbacks]
    assert kinds == [MetricsLog, EarlyStopping]
    assert [type(c).__name__ for c in trainer_of(tmp_path / "b", patience=0).callbacks] == [
        "MetricsLog",
        "ProbeTimeline",
    ]


def test_a_callback_sees_every_validation_and_its_reason_ends_the_run(tmp_path):
    recorder = Recorder(stop_at=2)
    trainer = trainer_of(tmp_path, callbacks=[recorder], epochs=4)
    progress = trainer.run()
    assert [r.epoch for r in recorder.records] == [1, 2] and recorder.events[-1] == ("end", "enough")
    lines = [r.to_dict() for r in recorder.records]
    assert lines == MetricsFile(trainer.run_dir.metrics).read()  # the same records metrics.jsonl keeps
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
    trainer = trainer_of(tmp_path, callbacks=[Recorder(stop_at=2)], epochs=3, validate_every=2)
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


def test_each_hook_is_told_in_order_and_a_resume_says_so(tmp_path):
    recorder = Recorder()
    trainer = trainer_of(tmp_path, callbacks=[recorder], epochs=1, patience=0)
    progress = trainer.run()
    steps = progress.step
    assert recorder.events[0] == ("start", False, 0)
    assert [e[1] for e in recorder.events if e[0] == "step"] == list(range(2, steps + 1, 2))  # every_steps = 2
    assert recorder.events[-2:] == [("validation", steps), ("end", "1 epochs")]
    assert isinstance(recorder.records[0], ValidationRecord) and recorder.records[0].kind == "epoch"
    again = Recorder()
    trainer_of(tmp_path, callbacks=[again], epochs=2, patience=0).run(resume=True)
    assert again.events[0] == ("start", True, steps) and again.events[-1] == ("end", "2 epochs")


class Boom(Callback):
    """Fails at the second validation, after the callbacks before it were told of it."""

    def after_validation(self, trainer, record):
        if record.epoch == 2:
            raise RuntimeError("the machine went away")
        return None


def test_a_resume_never_tells_a_callback_a_record_it_saw_and_on_end_says_why_it_failed(tmp_path):
    seen = Recorder()
    trainer = trainer_of(tmp_path, callbacks=[seen, Boom()], epochs=3, patience=0)
    with pytest.raises(RuntimeError):
        trainer.run()  # epoch 2 was recorded and told to `seen`, its checkpoint never written
    assert seen.events[-1] == ("end", "failed: RuntimeError: the machine went away")
    told = [r.step for r in seen.records]
    trainer_of(tmp_path, callbacks=[seen], epochs=3, patience=0).run(resume=True)  # redoes epoch 2
    steps = [r.step for r in seen.records]
    assert len(told) == 2 and len(steps) == 3 and steps == sorted(set(steps))  # epoch 2 told once
    assert [r["step"] for r in MetricsFile(trainer.run_dir.metrics).read()] == steps  # the file has it once too


def test_the_csv_callback_is_named_in_the_config_and_a_resume_trims_it(tmp_path):
    import csv

    raw = tiny_config(tmp_path, write_anki(tmp_path / "p.txt", synthetic_pairs()), train={"epochs": 1})
    raw["train"]["callbacks"] = ["csv"]
    config = config_from_dict(raw)
    prepare(config, log=lambda _: None)
    trainer = build_trainer(config, torch.device("cpu"), show_bar=False)
    trainer.run()
    path = trainer.run_dir.root / "metrics.csv"
    with open(path, encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    records = MetricsFile(trainer.run_dir.metrics).read()
    assert [int(r["step"]) for r in rows] == [r["step"] for r in records]
    assert [float(r["dev_bleu"]) for r in rows] == [r["dev_bleu"] for r in records]
    with open(path, "a", encoding="utf-8") as handle:  # a row the checkpoint does not include
        handle.write(f"2,{records[-1]['step'] + 5}" + "," * (len(rows[0]) - 2) + "\n")
    config.train.epochs = 2
    build_trainer(config, torch.device("cpu"), show_bar=False).run(resume=True)
    with open(path, encoding="utf-8") as handle:
        steps = [int(r["step"]) for r in csv.DictReader(handle)]
    assert steps == [r["step"] for r in MetricsFile(trainer.run_dir.metrics).read()] and len(steps) == 2
    raw["train"]["callbacks"] = ["cvs"]
    with pytest.raises(NmtError, match=r"'train.callbacks': 'cvs' is not a registered callback; registered: csv"):
        config_from_dict(raw)


class MemberMarker(Callback):
    """Writes its run's folder name at the start: a copy of it reaches each member's process."""

    def on_start(self, trainer, resumed):
        (trainer.run_dir.root / "told.txt").write_text(trainer.run_dir.root.name, encoding="utf-8")


def test_callbacks_handed_to_train_reach_each_member(tmp_path):
    from nmt.training.launch import train

    raw = tiny_config(tmp_path, write_anki(tmp_path / "p.txt", synthetic_pairs()), train={"epochs": 1, "members": 2})
    config = config_from_dict(raw)
    prepare(config, log=lambda _: None)
    trained = train(config, torch.device("cpu"), show_bar=False, log=lambda _: None, callbacks=[MemberMarker()])
    assert [(m.run_dir / "told.txt").read_text(encoding="utf-8") for m in trained] == ["member-1", "member-2"]
