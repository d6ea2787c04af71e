"""One command per run at a time (nmt/core/locking.py): a second command that would write into a
run another one is writing is refused at once, naming the holder's process and command, and
changes nothing; readers (translate, evaluate) go on; the lock goes with its holder however it
ends. Before, two `nmt train --resume` at once both exited 0 with every epoch twice in
metrics.jsonl, and two fresh trainings of one run left tokenizers its checkpoints refused."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from nmt.core.errors import NmtError
from nmt.core.locking import LOCK_NAME, holding

from .helpers import synthetic_pairs, tiny_config, write_anki

ROOT = Path(__file__).resolve().parents[1]
HOLD = "from nmt.core.locking import holding; import sys, time\nwith holding(sys.argv[1], 'nmt demo --hold'):\n"


def nmt(*args: str, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "nmt", *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def holder(folder: Path) -> subprocess.Popen:
    """Another process holding ``folder`` until it is killed."""
    process = subprocess.Popen(
        [sys.executable, "-c", HOLD + "    print('held', flush=True); time.sleep(600)", str(folder)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stdout.readline().strip() == "held"
    return process


def test_a_held_folder_is_refused_naming_the_holder_and_freed_by_its_death(tmp_path):
    other = holder(tmp_path)
    try:
        named = rf"in use by process {other.pid} \(nmt demo --hold\).*Nothing was changed"
        with pytest.raises(NmtError, match=named), holding(tmp_path, "nmt second"):
            pass
    finally:
        other.send_signal(signal.SIGKILL)  # no cleanup runs: the system releases the lock
        other.wait()
    with holding(tmp_path, "nmt third"), holding(tmp_path, "the pipeline it calls"):  # and once per process
        assert (tmp_path / LOCK_NAME).read_text(encoding="utf-8").split()[1:] == ["nmt", "third"]


def test_a_linked_lock_file_is_refused_and_its_target_untouched(tmp_path):
    target = tmp_path / "precious.txt"
    target.write_text("keep me\n", encoding="utf-8")
    run = tmp_path / "run"
    run.mkdir()
    (run / LOCK_NAME).symlink_to(target)
    with pytest.raises(NmtError, match="is a symbolic link"), holding(run, "nmt train"):
        pass
    assert target.read_text(encoding="utf-8") == "keep me\n"


@pytest.fixture
def config(tmp_path) -> Path:
    data = write_anki(tmp_path / "pairs.txt", synthetic_pairs())
    train = {"epochs": 400, "max_minutes": 0.25, "patience": 0}  # a run that lasts 15 s
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(tiny_config(tmp_path, data, train=train)), encoding="utf-8")
    return path


def wait_for(condition, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


@pytest.mark.slow
def test_while_a_run_trains_writers_are_refused_at_once_and_readers_go_on(tmp_path, config):
    run = tmp_path / "run"
    first = nmt("train", "--config", str(config), cwd=tmp_path)
    try:
        wait_for(lambda: (run / "checkpoints" / "best.pt").is_file())  # an epoch is done: it trains on
        refused = {
            "train --resume": ["train", "--config", str(config), "--resume"],
            "train, another data.max_pairs": ["train", "--config", str(config), "--set", "data.max_pairs=100"],
            "prepare --force": ["prepare", "--config", str(config), "--force"],
            "export": ["export", str(run), str(tmp_path / "package")],
            "average": ["average", str(run)],
        }
        for what, args in refused.items():
            started = time.monotonic()
            second = subprocess.run(
                [sys.executable, "-m", "nmt", *args], cwd=tmp_path, capture_output=True, text=True, timeout=120
            )
            assert second.returncode == 1, (what, second.stderr)
            assert f"in use by process {first.pid} (nmt train --config" in second.stderr, (what, second.stderr)
            assert time.monotonic() - started < 20, what  # at once, not after the first ends
            assert first.poll() is None, what
        assert not (tmp_path / "package").exists()
        for args in (
            ["translate", "--config", str(config), "--text", "I see tea."],
            ["evaluate", "--config", str(config)],
        ):
            reader = subprocess.run([sys.executable, "-m", "nmt", *args], cwd=tmp_path, capture_output=True, text=True)
            assert reader.returncode == 0, reader.stderr
    finally:
        _, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    epochs = [json.loads(line)["epoch"] for line in (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    assert epochs == sorted(set(epochs)), epochs  # each validation once
    again = subprocess.run(
        [sys.executable, "-m", "nmt", "translate", "--config", str(config), "--text", "I see tea."],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert again.returncode == 0 and again.stdout.strip(), again.stderr  # the run is whole


def test_the_lock_is_released_when_a_command_fails(tmp_path, config):
    from typer.testing import CliRunner

    from nmt.cli import app

    bad = CliRunner().invoke(app, ["prepare", "--config", str(config), "--set", "data.path=nowhere.tsv"])
    assert bad.exit_code == 1 and "not found" in bad.output
    with holding(tmp_path / "run", "the next command"):
        pass
    assert os.path.isfile(tmp_path / "run" / LOCK_NAME)
