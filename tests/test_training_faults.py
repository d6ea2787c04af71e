"""Faults during training and writing: non-finite steps, out of memory, a full disk, an
unwritable run directory."""

import pytest
import torch
import yaml
from typer.testing import CliRunner

from nmt.cli import app
from nmt.config.parsing import config_from_dict
from nmt.core.errors import NmtError
from nmt.pipelines.prepare import prepare
from nmt.training import trainer as trainer_module
from nmt.training.trainer import Trainer, build_trainer

from .helpers import synthetic_pairs, tiny_config, write_anki

runner = CliRunner()


def make_trainer(tmp_path, **train) -> Trainer:
    config = config_from_dict(tiny_config(tmp_path, write_anki(tmp_path / "p.txt", synthetic_pairs()), train=train))
    prepare(config, log=lambda _: None)
    return build_trainer(config, torch.device("cpu"), show_bar=False)


def test_nonfinite_steps_are_skipped_counted_and_stop_training(tmp_path, monkeypatch):
    trainer = make_trainer(tmp_path, max_nonfinite=3)
    model = trainer.model
    real_forward = model.forward
    poisoned_calls = {2}  # the 2nd step produces NaN logits
    calls = {"n": 0}

    def forward(*args, **kwargs):
        calls["n"] += 1
        logits, attn = real_forward(*args, **kwargs)
        return (logits * float("nan") if calls["n"] in poisoned_calls else logits), attn

    monkeypatch.setattr(model, "forward", forward)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    # Step 1 trains; step 2 is NaN and must leave the weights exactly as step 1 left them.
    snapshots = []
    original_step = trainer_module.train_step

    def spy(*args, **kwargs):
        result = original_step(*args, **kwargs)
        snapshots.append({k: v.clone() for k, v in model.state_dict().items()})
        return result

    monkeypatch.setattr(trainer_module, "train_step", spy)
    stats = trainer.train_epoch(1)
    assert trainer.progress.nonfinite_steps == 1 and torch.isfinite(torch.tensor(stats.loss))
    assert any(not torch.equal(before[k], snapshots[0][k]) for k in before)  # step 1 changed weights
    assert all(torch.equal(snapshots[0][k], snapshots[1][k]) for k in before)  # step 2 changed nothing

    poisoned_calls.update(range(1, 10_000))
    trainer.progress.finish_epoch(1, 0.0)  # what a validation at the epoch's end does
    with pytest.raises(NmtError, match="3 steps in a row had a non-finite loss or gradient"):
        trainer.train_epoch(2)


def test_out_of_memory_names_the_batch_and_what_to_lower(tmp_path, monkeypatch):
    trainer = make_trainer(tmp_path)

    def out_of_memory(*_args, **_kwargs):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(trainer_module, "train_step", out_of_memory)
    with pytest.raises(NmtError, match=r"ran out of memory at epoch 1, batch 1 .*Lower train.batch_size \(now 16\)"):
        trainer.train_epoch(1)


def test_full_disk_gives_a_message_not_a_traceback(tmp_path, anki_file, monkeypatch):
    import errno

    import nmt.data.streaming as streaming

    def no_space(*_args, **_kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "run" / "data" / "train.en"))

    monkeypatch.setattr(streaming, "atomic_text_writer", no_space)
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(tiny_config(tmp_path, anki_file)), encoding="utf-8")
    result = runner.invoke(app, ["prepare", "--config", str(config)])
    assert result.exit_code == 1
    assert "No space left on device" in result.stderr and "train.en" in result.stderr
    assert "Traceback" not in result.output


def test_unwritable_run_dir_gives_a_message(tmp_path, anki_file):
    blocker = tmp_path / "a-file"
    blocker.write_text("x", encoding="utf-8")
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(tiny_config(tmp_path, anki_file, run_dir=str(blocker / "run"))), encoding="utf-8")
    result = runner.invoke(app, ["prepare", "--config", str(config)])
    assert result.exit_code == 1 and "Error:" in result.stderr and "Traceback" not in result.output
