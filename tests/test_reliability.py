"""Crash-exact resume, graceful stops, numerical faults, bad input (issue: reliability)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from nmt.cli import app
from nmt.config import config_from_dict
from nmt.data.anki import read_anki
from nmt.data.prepare import prepare
from nmt.errors import NmtError
from nmt.train.checkpoint import save_training_checkpoint

from .conftest import synthetic_pairs, tiny_config, write_anki

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


def write_config(tmp_path: Path, name: str, **train) -> Path:
    data = write_anki(tmp_path / "pairs.txt", synthetic_pairs() * 2)  # duplicates dropped: same 150-ish pairs
    raw = tiny_config(tmp_path, data, run_dir=str(tmp_path / name), data={"prepared_dir": str(tmp_path / "prepared")},
                      train={"epochs": 4, "batch_size": 8, "threads": 1, "checkpoint_every": 3, **train},
                      model={"dropout": 0.2})  # fmt: skip
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return path


def start_training(config: Path, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-m", "nmt", "train", "--config", str(config), *extra], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip


def wait_for(path_glob: str, directory: Path, process: subprocess.Popen, count: int, timeout: float = 120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if len(list(directory.glob(path_glob))) >= count or process.poll() is not None:
            return
        time.sleep(0.005)
    raise AssertionError("timed out waiting for checkpoints")


def final_weights(run_dir: Path) -> dict:
    return torch.load(run_dir / "checkpoints" / "last.pt", weights_only=True)


@pytest.mark.slow
def test_sigkill_mid_epoch_then_resume_equals_uninterrupted_run(tmp_path):
    straight = write_config(tmp_path, "straight")
    assert runner.invoke(app, ["train", "--config", str(straight)]).exit_code == 0
    reference = final_weights(tmp_path / "straight")

    killed = write_config(tmp_path, "killed")
    ckpt_dir = tmp_path / "killed" / "checkpoints"
    process = start_training(killed)
    wait_for("step-*.pt", ckpt_dir, process, count=3)  # a few mid-epoch checkpoints written
    assert process.poll() is None, "training finished before it could be killed"
    process.send_signal(signal.SIGKILL)
    process.wait()
    interrupted = torch.load(ckpt_dir / "last.pt", weights_only=True)["progress"]
    assert interrupted["step"] < reference["progress"]["step"]

    result = runner.invoke(app, ["train", "--config", str(killed), "--resume"])
    assert result.exit_code == 0, result.output
    resumed = final_weights(tmp_path / "killed")
    assert resumed["progress"]["step"] == reference["progress"]["step"]
    for name, tensor in reference["model"].items():
        assert torch.equal(tensor, resumed["model"][name]), name
    assert len(list(ckpt_dir.glob("step-*.pt"))) <= 3  # keep_checkpoints


def test_loader_workers_train_the_same_weights_as_the_loop(tmp_path):
    finals = {}
    for workers in (0, 2):
        config = write_config(tmp_path, f"workers{workers}", loader_workers=workers, epochs=2)
        result = runner.invoke(app, ["train", "--config", str(config)])
        assert result.exit_code == 0, result.output
        finals[workers] = final_weights(tmp_path / f"workers{workers}")
    assert finals[0]["progress"]["step"] == finals[2]["progress"]["step"] > 0
    for name, tensor in finals[0]["model"].items():
        assert torch.equal(tensor, finals[2]["model"][name]), name


@pytest.mark.slow
def test_ctrl_c_to_the_process_group_with_loader_workers_stops_cleanly(tmp_path):
    """A terminal's Ctrl-C reaches every process of the group, the loader's workers too:
    they leave it to the main process, which checkpoints and exits 130."""
    config = write_config(tmp_path, "group", loader_workers=2)
    ckpt_dir = tmp_path / "group" / "checkpoints"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen([sys.executable, "-m", "nmt", "train", "--config", str(config)], cwd=ROOT, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip
    wait_for("step-*.pt", ckpt_dir, process, count=1)
    assert process.poll() is None, "training finished before it could be interrupted"
    os.killpg(process.pid, signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr
    assert "Training stopped by SIGINT" in stderr and "Traceback" not in stderr


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_saves_a_resumable_checkpoint_and_says_how_to_resume(tmp_path, sig):
    config = write_config(tmp_path, "stopped")
    ckpt_dir = tmp_path / "stopped" / "checkpoints"
    process = start_training(config)
    wait_for("step-*.pt", ckpt_dir, process, count=1)
    assert process.poll() is None, "training finished before it could be interrupted"
    process.send_signal(sig)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr
    assert f"Training stopped by {sig.name}" in stderr and "Resume with: nmt train --config" in stderr
    assert "Traceback" not in stderr
    state = torch.load(ckpt_dir / "last.pt", weights_only=True)["progress"]
    assert state["step"] > 0
    result = runner.invoke(app, ["train", "--config", str(config), "--resume"])
    assert result.exit_code == 0 and "Resuming from" in result.output


def test_nonfinite_steps_are_skipped_counted_and_stop_training(tmp_path, monkeypatch):
    from nmt.train import loop
    from nmt.translate import load_tokenizers

    config = config_from_dict(tiny_config(tmp_path, write_anki(tmp_path / "p.txt", synthetic_pairs()),
                                          train={"max_nonfinite": 3}))  # fmt: skip
    prepare(config, log=lambda _: None)
    src_tok, tgt_tok = load_tokenizers(config)
    data = loop.load_train_data(config, src_tok, tgt_tok)
    model, optimizer, _ = loop.build_training(config, src_tok, tgt_tok, torch.device("cpu"))
    real_forward = model.forward
    poisoned_calls = {2}  # the 2nd step produces NaN logits

    calls = {"n": 0}

    def forward(*args, **kwargs):
        calls["n"] += 1
        logits, attn = real_forward(*args, **kwargs)
        return (logits * float("nan") if calls["n"] in poisoned_calls else logits), attn

    monkeypatch.setattr(model, "forward", forward)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    progress = loop.Progress()
    # Step 1 trains; step 2 is NaN and must leave the weights exactly as step 1 left them.
    snapshots = []
    original_step = loop.train_step

    def spy(*args, **kwargs):
        result = original_step(*args, **kwargs)
        snapshots.append({k: v.clone() for k, v in model.state_dict().items()})
        return result

    monkeypatch.setattr(loop, "train_step", spy)
    stats = loop.train_epoch(model, data.train, optimizer, config.train, 1, torch.device("cpu"), progress, show_bar=False)
    assert progress.nonfinite_steps == 1 and torch.isfinite(torch.tensor(stats.loss))
    assert any(not torch.equal(before[k], snapshots[0][k]) for k in before)  # step 1 changed weights
    assert all(torch.equal(snapshots[0][k], snapshots[1][k]) for k in before)  # step 2 changed nothing

    poisoned_calls.update(range(1, 10_000))
    with pytest.raises(NmtError, match="3 steps in a row had a non-finite loss or gradient"):
        loop.train_epoch(model, data.train, optimizer, config.train, 2, torch.device("cpu"), loop.Progress(), show_bar=False)


def test_checkpoint_rotation_keeps_last_k_and_points_last_and_best(tmp_path):
    for step in range(1, 6):
        save_training_checkpoint(tmp_path, {"step": step}, step, keep=2, best=step == 3)
    assert sorted(p.name for p in tmp_path.glob("step-*.pt")) == ["step-00000004.pt", "step-00000005.pt"]
    from nmt.train.checkpoint import load_checkpoint

    assert load_checkpoint(tmp_path / "last.pt")["step"] == 5
    assert load_checkpoint(tmp_path / "best.pt")["step"] == 3  # survives its step file's deletion
    assert not list(tmp_path.glob(".*tmp"))


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", "is empty"),
        (b"\n\n  \n", "is empty"),
        (bytes(range(256)) * 40, "does not look like an Anki/Tatoeba TSV"),
        (b"just one column\n" * 10, "does not look like an Anki/Tatoeba TSV"),
    ],
)
def test_prepare_refuses_empty_and_binary_files_and_writes_nothing(tmp_path, content, message):
    path = tmp_path / "bad.txt"
    path.write_bytes(content)
    config = config_from_dict(tiny_config(tmp_path, path))
    with pytest.raises(NmtError, match=message):
        prepare(config)
    assert not (tmp_path / "run" / "data" / "manifest.json").exists()


def test_long_sentences_are_clipped_and_counted(tmp_path):
    path = tmp_path / "long.txt"
    path.write_text("Go.\tजा.\n" + "word " * 5000 + "\tशब्द\n", encoding="utf-8")
    result = read_anki(path, max_chars=100)
    assert result.clipped == 1 and len(result.pairs[1].src) <= 100


def test_unwritable_run_dir_gives_a_message(tmp_path, anki_file):
    blocker = tmp_path / "a-file"
    blocker.write_text("x", encoding="utf-8")
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(tiny_config(tmp_path, anki_file, run_dir=str(blocker / "run"))), encoding="utf-8")
    result = runner.invoke(app, ["prepare", "--config", str(config)])
    assert result.exit_code == 1 and "Error:" in result.stderr and "Traceback" not in result.output


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=400))
def test_reading_random_bytes_never_crashes(tmp_path, data):
    path = tmp_path / "fuzz.txt"
    path.write_bytes(data)
    result = read_anki(path)
    body = data.removeprefix(b"\xef\xbb\xbf")
    assert result.lines_read == len(body.split(b"\n")) - (body.endswith(b"\n") or not body)
    assert result.lines_read == len(result.pairs) + len(result.problems) + result.blank_lines
    assert all(p.src and p.tgt and "\t" not in p.src + p.tgt for p in result.pairs)
    assert all(p.line_no >= 1 for p in result.problems)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(st.binary(max_size=600), st.lists(st.text(max_size=40), max_size=30).map(lambda ls: "\n".join(ls).encode())))
def test_prepare_on_random_bytes_or_text_succeeds_or_says_why(tmp_path_factory, content):
    root = tmp_path_factory.mktemp("fuzzprep")
    path = root / "in.txt"
    path.write_bytes(content)
    config = config_from_dict(tiny_config(root, path))
    try:
        prepare(config, log=lambda _: None)
    except NmtError as exc:
        assert str(exc)
        assert not (root / "run" / "data" / "manifest.json").exists()


def test_full_disk_gives_a_message_not_a_traceback(tmp_path, anki_file, monkeypatch):
    import errno

    import nmt.data.prepare as prepare_module

    def no_space(*_args, **_kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "run" / "data" / "train.en"))

    monkeypatch.setattr(prepare_module, "write_lines_atomic", no_space)
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(tiny_config(tmp_path, anki_file)), encoding="utf-8")
    result = runner.invoke(app, ["prepare", "--config", str(config)])
    assert result.exit_code == 1
    assert "No space left on device" in result.stderr and "train.en" in result.stderr
    assert "Traceback" not in result.output


def test_out_of_memory_names_the_batch_and_what_to_lower(tmp_path, monkeypatch):
    from nmt.train import loop
    from nmt.translate import load_tokenizers

    config = config_from_dict(tiny_config(tmp_path, write_anki(tmp_path / "p.txt", synthetic_pairs())))
    prepare(config, log=lambda _: None)
    src_tok, tgt_tok = load_tokenizers(config)
    data = loop.load_train_data(config, src_tok, tgt_tok)
    model, optimizer, _ = loop.build_training(config, src_tok, tgt_tok, torch.device("cpu"))

    def out_of_memory(*_args, **_kwargs):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(loop, "train_step", out_of_memory)
    with pytest.raises(NmtError, match=r"ran out of memory at epoch 1, batch 1 .*Lower train.batch_size \(now 16\)"):
        loop.train_epoch(model, data.train, optimizer, config.train, 1, torch.device("cpu"), loop.Progress(), show_bar=False)
