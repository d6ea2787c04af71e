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
from pathlib import Path

import pytest
import yaml

from nmt.core.errors import NmtError
from nmt.core.locking import LOCK_NAME, holding

from .helpers import synthetic_pairs, tiny_config, wait_until, write_anki

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


# A run held alive by a file, not by a budget: after its first epoch (and checkpoint) it waits
# at each step while RUN/hold exists, however slow or loaded the machine (before, a 15-second
# budget ended first on a loaded machine, and the writer it should have refused succeeded).
HOLD_PLUGIN = """
import time

from nmt.core.registry import CALLBACKS
from nmt.training.callbacks import Callback


@CALLBACKS.register("hold-while-file")
class HoldWhileFile(Callback):
    every_steps = 1

    def after_step(self, trainer, step):
        hold = trainer.run_dir.root / "hold"
        for _ in range(60_000):  # ten minutes at most: a test that forgot the file still ends
            if trainer.progress.epoch < 1 or not hold.exists():
                return
            time.sleep(0.01)
"""


@pytest.fixture
def config(tmp_path) -> Path:
    data = write_anki(tmp_path / "pairs.txt", synthetic_pairs())
    path = tmp_path / "plain.yaml"
    path.write_text(yaml.safe_dump(tiny_config(tmp_path, data, train={"epochs": 1})), encoding="utf-8")
    return path


@pytest.fixture
def held_config(tmp_path) -> Path:
    """A run that waits after its first epoch while RUN/hold exists (HOLD_PLUGIN)."""
    data = write_anki(tmp_path / "pairs.txt", synthetic_pairs())
    (tmp_path / "nmt_hold_plugin.py").write_text(HOLD_PLUGIN, encoding="utf-8")
    train = {"epochs": 15, "patience": 0, "callbacks": ["hold-while-file"]}
    path = tmp_path / "c.yaml"
    raw = tiny_config(tmp_path, data, train=train, plugins=["nmt_hold_plugin"])
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return path


def nmt_with_plugin(*args: str, cwd: Path, wait: bool = True):
    """``nmt --plugin nmt_hold_plugin ARGS`` (the config names the plugin), the test folder on the path."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(cwd), str(ROOT)])}
    command = [sys.executable, "-m", "nmt", "--plugin", "nmt_hold_plugin", *args]
    if wait:
        return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    return subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.fixture
def in_process(tmp_path, monkeypatch):
    """``nmt ARGS`` run in this process (CliRunner), trusting the config's plugin as the
    process that holds the run does (``--plugin``: NMT_TRUSTED_PLUGINS); the plugin's callback
    unregistered afterwards, so that no other test sees it."""
    from typer.testing import CliRunner

    from nmt.cli import app
    from nmt.core.registry import CALLBACKS

    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("NMT_TRUSTED_PLUGINS", "nmt_hold_plugin")
    runner = CliRunner()
    yield lambda *args: runner.invoke(app, list(args))
    if "hold-while-file" in CALLBACKS:
        del CALLBACKS["hold-while-file"]
    sys.modules.pop("nmt_hold_plugin", None)


@pytest.mark.slow
def test_while_a_run_trains_writers_are_refused_at_once_and_readers_go_on(tmp_path, held_config, in_process):
    """The run trains in a process of its own; the other commands run in this one (each a
    process of its own cost seconds apiece: the lock is per process either way)."""
    config = held_config
    run = tmp_path / "run"
    run.mkdir()
    (run / "hold").touch()  # the run waits after its first epoch until the test is done with it
    first = nmt_with_plugin("train", "--config", str(config), cwd=tmp_path, wait=False)
    try:
        wait_until(lambda: (run / "checkpoints" / "best.pt").is_file() or first.poll() is not None, 300)
        assert first.poll() is None, first.communicate()
        refused = {
            "train --resume": ["train", "--config", str(config), "--resume"],
            "train, another data.max_pairs": ["train", "--config", str(config), "--set", "data.max_pairs=100"],
            "prepare --force": ["prepare", "--config", str(config), "--force"],
            "export": ["export", str(run), str(tmp_path / "package")],
            "average": ["average", str(run)],
        }
        for what, args in refused.items():
            second = in_process(*args)
            assert second.exit_code == 1, (what, second.output)
            assert f"in use by process {first.pid} (nmt train --config" in second.output, (what, second.output)
            assert first.poll() is None, what  # refused while the run holds it, not after it ended
        assert not (tmp_path / "package").exists()
        for args in (
            ["translate", "--config", str(config), "--text", "I see tea."],
            ["evaluate", "--config", str(config)],
        ):
            reader = in_process(*args)
            assert reader.exit_code == 0, reader.output
        assert first.poll() is None  # held through every command above
    finally:
        (run / "hold").unlink(missing_ok=True)
        _, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    epochs = [json.loads(line)["epoch"] for line in (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    assert epochs == sorted(set(epochs)), epochs  # each validation once
    again = in_process("translate", "--config", str(config), "--text", "I see tea.")
    assert again.exit_code == 0 and again.stdout.strip(), again.output  # the run is whole


def test_the_lock_is_released_when_a_command_fails(tmp_path, config):
    from typer.testing import CliRunner

    from nmt.cli import app

    bad = CliRunner().invoke(app, ["prepare", "--config", str(config), "--set", "data.path=nowhere.tsv"])
    assert bad.exit_code == 1 and "not found" in bad.output
    with holding(tmp_path / "run", "the next command"):
        pass
    assert os.path.isfile(tmp_path / "run" / LOCK_NAME)
