"""Stopping training and going on: SIGKILL then --resume, Ctrl-C and SIGTERM, loader workers."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from typer.testing import CliRunner

from nmt.cli import app

from .helpers import synthetic_pairs, tiny_config, wait_until, write_anki

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


def write_config(tmp_path: Path, name: str, **train) -> Path:
    data = write_anki(tmp_path / "pairs.txt", synthetic_pairs() * 2)  # duplicates dropped: same 150-ish pairs
    raw = tiny_config(
        tmp_path,
        data,
        run_dir=str(tmp_path / name),
        data={"prepared_dir": str(tmp_path / "prepared")},
        train={"epochs": 4, "batch_size": 8, "threads": 1, "checkpoint_every": 3, "keep_checkpoints": 3, **train},
        model={"dropout": 0.2},
    )
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return path


def start_training(config: Path, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "nmt", "train", "--config", str(config), *extra],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for(path_glob: str, directory: Path, process: subprocess.Popen, count: int) -> None:
    """Until ``count`` files match (or the process ended: the caller's assertions say which)."""
    done = lambda: len(list(directory.glob(path_glob))) >= count or process.poll() is not None  # noqa: E731
    wait_until(done, what=f"{count} {path_glob} in {directory}")


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
    process = subprocess.Popen(
        [sys.executable, "-m", "nmt", "train", "--config", str(config)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    wait_for("step-*.pt", ckpt_dir, process, count=1)
    assert process.poll() is None, "training finished before it could be interrupted"
    os.killpg(process.pid, signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr
    assert "Training stopped by SIGINT" in stderr and "Traceback" not in stderr


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
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
