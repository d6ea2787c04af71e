"""Ensembled training (train.members): models trained side by side, translated as one ensemble."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from typer.testing import CliRunner

from nmt.cli import app
from nmt.config.files import load_config
from nmt.core.errors import NmtError
from nmt.model.ensemble import Ensemble
from nmt.pipelines.prepare import prepare
from nmt.runtime.loading import load_checkpoints
from nmt.training.callbacks import Callback
from nmt.training.distributed import Distributed
from nmt.training.launch import train
from nmt.training.members import member_cap, member_config, member_threads

from .helpers import synthetic_pairs, tiny_config, wait_until, write_anki

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


def write_config(tmp_path: Path, name: str = "pair", **train) -> Path:
    data = write_anki(tmp_path / "pairs.tsv", synthetic_pairs())
    raw = tiny_config(
        tmp_path, data, run_dir=str(tmp_path / name), train={"epochs": 3, "threads": 2, "members": 2, **train}
    )
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return path


def test_each_member_is_a_run_of_its_own_seed_and_share_of_the_threads(tmp_path):
    config = load_config(write_config(tmp_path, threads=4, members=3), [])
    members = [member_config(config, k) for k in (1, 2, 3)]
    assert [m.train.seed for m in members] == [7, 8, 9]
    assert [m.train.threads for m in members] == [1, 1, 1] and member_threads(config) == 1
    assert [Path(m.run_dir).name for m in members] == ["member-1", "member-2", "member-3"]
    assert {m.prepared_dir for m in members} == {config.prepared_dir}  # one preparation for all
    assert all(m.train.members == 1 for m in members)


def test_training_from_code_says_where_each_trained_model_is(tmp_path):
    config = load_config(write_config(tmp_path, epochs=1, members=1), [])
    prepare(config, log=lambda _: None)
    (trained,) = train(config, torch.device("cpu"), show_bar=False)
    assert trained.run_dir == Path(config.run_dir) and trained.best_epoch == 1
    assert (trained.run_dir / "checkpoints" / "best.pt").is_file()
    config.train.members = 2  # members are processes of their own: not one per torchrun rank
    with pytest.raises(NmtError, match="without torchrun"):
        train(config, torch.device("cpu"), ddp=Distributed(rank=0, world=2))


class Rendezvous(Callback):
    """Each member, as its run starts, leaves a file and waits for the others' (a copy of this
    callback goes to each member's process): members trained one after the other never meet."""

    def __init__(self, folder: Path, members: int):
        self.folder, self.members = folder, members

    def on_start(self, trainer, resumed: bool) -> None:
        (self.folder / f"arrived-{os.getpid()}").touch()
        for _ in range(12_000):  # up to two minutes for the others to start, however loaded the machine
            if len(list(self.folder.glob("arrived-*"))) >= self.members:
                (self.folder / f"met-{os.getpid()}").touch()
                return
            time.sleep(0.01)


@pytest.mark.slow
def test_members_train_at_the_same_time_each_measuring_threads_within_its_share(tmp_path):
    config = load_config(write_config(tmp_path, epochs=1, threads="auto"), [])
    prepare(config, log=lambda _: None)
    meeting = tmp_path / "meeting"
    meeting.mkdir()
    train(config, torch.device("cpu"), show_bar=False, callbacks=[Rendezvous(meeting, 2)])
    assert len(list(meeting.glob("met-*"))) == 2  # both were running at once
    assert member_threads(config) == "auto" and member_config(config, 1).train.threads == "auto"
    log = (Path(config.run_dir) / "member-1" / "train.log").read_text(encoding="utf-8")
    if member_cap(config) == 1:  # two members on two cores: one thread each, nothing to measure
        assert "Threads measured" not in log


@pytest.fixture(scope="module")
def members_run(tmp_path_factory) -> Path:
    tmp_path = tmp_path_factory.mktemp("members")
    config = write_config(tmp_path)
    result = runner.invoke(app, ["train", "--config", str(config)])
    assert result.exit_code == 0, result.output
    assert "member-1: best dev BLEU" in result.output and "member-2: best dev BLEU" in result.output
    assert (tmp_path / "pair" / "member-2" / "learning_curves.png").is_file()  # each member's curves
    return config


def test_members_train_side_by_side_differ_and_decode_as_an_ensemble(members_run):
    config = load_config(members_run, [])
    run = Path(config.run_dir)
    first, second = (torch.load(run / f"member-{k}" / "checkpoints" / "best.pt", weights_only=False) for k in (1, 2))
    weight = "decoder.output.weight"
    assert not torch.equal(first["model"][weight], second["model"][weight])  # other seeds, other models
    loaded = load_checkpoints(config, ["best"], torch.device("cpu"))
    assert isinstance(loaded.model, Ensemble) and len(loaded.model.members) == 2
    result = runner.invoke(app, ["evaluate", "--config", str(members_run)])
    assert result.exit_code == 0, result.output
    assert "BLEU" in result.output
    plots = run / "attention"  # as scripts/main.sh translates: the ensemble's mean attention drawn
    result = runner.invoke(
        app, ["translate", "--config", str(members_run), "--plot-attention", str(plots)], input="I see apples.\n"
    )
    assert result.exit_code == 0 and result.output.strip(), result.output
    assert list(plots.glob("*.png")), result.output


def test_a_members_run_is_exported_member_by_member(members_run, tmp_path):
    run = load_config(members_run, []).run_dir
    result = runner.invoke(app, ["export", run, str(tmp_path / "pkg")])
    assert result.exit_code != 0
    assert f"nmt export {run}/member-1 OUT-1" in result.output and "--model OUT-1 --model OUT-2" in result.output
    for k in (1, 2):
        result = runner.invoke(app, ["export", f"{run}/member-{k}", str(tmp_path / f"pkg-{k}")])
        assert result.exit_code == 0, result.output
    sources = "I see apples.\nwe like tea.\nthey eat rice.\n"
    packaged = runner.invoke(
        app, ["translate", "--model", str(tmp_path / "pkg-1"), "--model", str(tmp_path / "pkg-2")], input=sources
    )
    assert packaged.exit_code == 0, packaged.output
    # the two packages translate as the run's own ensemble does (a model of 3 epochs may still
    # translate a sentence to nothing: the comparison holds either way)
    trained = runner.invoke(app, ["translate", "--config", str(members_run)], input=sources)
    assert trained.exit_code == 0, trained.output
    assert packaged.output == trained.output and len(packaged.output.splitlines()) == 3, packaged.output


@pytest.mark.slow
def test_sigterm_stops_every_member_with_a_checkpoint_and_resume_finishes_them(tmp_path):
    config = write_config(tmp_path, "stopped", epochs=200, batch_size=8, checkpoint_every=3)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "nmt", "train", "--config", str(config)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    run = tmp_path / "stopped"
    checkpointed = lambda: all(list((run / f"member-{k}" / "checkpoints").glob("step-*.pt")) for k in (1, 2))  # noqa: E731
    wait_until(lambda: checkpointed() or process.poll() is not None, what="both members' step checkpoints")
    assert process.poll() is None, "training finished before it could be stopped"
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr and "member-*/checkpoints/last.pt" in stderr
    steps = [
        torch.load(run / f"member-{k}" / "checkpoints" / "last.pt", weights_only=True)["progress"]["step"]
        for k in (1, 2)
    ]
    assert all(step > 0 for step in steps)
    result = runner.invoke(app, ["train", "--config", str(config), "--resume", "--set", "train.epochs=2"])
    assert result.exit_code == 0, result.output
