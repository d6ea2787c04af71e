"""Crafted and damaged model packages and run directories, made by seeded random mutations of a
real one: each file's bytes flipped, cut short, emptied or replaced; the manifest's and the
config's keys removed or given values of other types; files replaced by symbolic links to a
file outside. Loading one must end in a clear ``NmtError`` or a model that translates — never
another exception, and never a model that read a linked file (docs/explanation/security.md)."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest
import torch
import yaml
from typer.testing import CliRunner

from nmt.cli import app
from nmt.core.errors import NmtError
from nmt.pipelines.translate import Translator
from nmt.runtime.loading import load_trained

from .helpers import synthetic_pairs, tiny_config, write_anki

runner = CliRunner()
CASES = 60  # per kind of folder; seeded, so a failure names a case that can be run again
ODD_VALUES = [None, -1, 0, 10**12, 3.5, "x", "../../outside", [], {}, [1, "a"], True]


@pytest.fixture(scope="module")
def originals(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("crafted")
    data = write_anki(root / "pairs.tsv", synthetic_pairs())
    raw = tiny_config(root, data, run_dir=str(root / "run"), train={"epochs": 1, "probes": 2})
    config = root / "c.yaml"
    config.write_text(yaml.safe_dump(raw), encoding="utf-8")
    for args in (["train", "--config", str(config)], ["export", str(root / "run"), str(root / "package")]):
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
    (root / "outside.txt").write_text("a file outside the package\n", encoding="utf-8")
    return {"package": root / "package", "run": root / "run", "outside": root / "outside.txt"}


def mutate_bytes(path: Path, rng: random.Random) -> str:
    data = bytearray(path.read_bytes())
    how = rng.choice(["flip", "truncate", "empty", "random"])
    if how == "flip" and data:
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    elif how == "truncate":
        data = data[: rng.randrange(len(data) + 1)]
    elif how == "empty":
        data = bytearray()
    else:
        data = bytearray(rng.randbytes(rng.randint(1, 256)))
    path.write_bytes(bytes(data))
    return f"{how} {path.name}"


def nested_keys(tree, prefix=()) -> list[tuple]:
    keys = []
    if isinstance(tree, dict):
        for key, value in tree.items():
            keys.append((*prefix, key))
            keys += nested_keys(value, (*prefix, key))
    return keys


def mutate_structure(path: Path, rng: random.Random) -> str:
    """Remove a key of a JSON or YAML file, or give it a value of another type."""
    is_json = path.suffix == ".json"
    text = path.read_text(encoding="utf-8")
    tree = json.loads(text) if is_json else yaml.safe_load(text)
    key = rng.choice(nested_keys(tree))
    node = tree
    for part in key[:-1]:
        node = node[part]
    if rng.random() < 0.3:
        del node[key[-1]]
        what = "removed"
    else:
        node[key[-1]] = rng.choice(ODD_VALUES)
        what = f"= {node[key[-1]]!r}"
    path.write_text(json.dumps(tree) if is_json else yaml.safe_dump(tree), encoding="utf-8")
    return f"{path.name}: {'.'.join(map(str, key))} {what}"


def link_outside(path: Path, outside: Path) -> str:
    path.unlink()
    path.symlink_to(outside)
    return f"{path.name} -> a file outside"


def crafted(original: Path, work: Path, outside: Path, seed: int) -> tuple[Path, str, bool]:
    """A mutated copy of ``original``: (folder, what was done, whether a link was planted)."""
    rng = random.Random(seed)
    folder = work / f"case-{seed}"
    shutil.copytree(original, folder)
    files = sorted(
        p
        for p in folder.rglob("*")
        if p.is_file() and p.suffix in (".json", ".yaml", ".safetensors", ".model", ".pt", ".jsonl")
    )
    target = rng.choice(files)
    roll = rng.random()
    if roll < 0.15:
        return folder, link_outside(target, outside), True
    if roll < 0.55 and target.suffix in (".json", ".yaml"):
        return folder, mutate_structure(target, rng), False
    return folder, mutate_bytes(target, rng), False


def load_or_refuse(folder: Path) -> str:
    """'refused' (a clear NmtError) or 'works' (the model translates); anything else raises."""
    try:
        translator = Translator(load_trained(folder, torch.device("cpu")))
    except NmtError:
        return "refused"
    try:
        translator.translate(["I see apples."], beam_size=2)
    except NmtError:
        return "refused"
    return "works"


@pytest.mark.parametrize("kind", ["package", "run"])
def test_crafted_folders_load_or_are_refused_clearly_and_links_are_never_followed(originals, tmp_path, kind):
    outcomes = {"refused": 0, "works": 0}
    for seed in range(CASES):
        folder, what, linked = crafted(originals[kind], tmp_path, originals["outside"], seed)
        try:
            outcome = load_or_refuse(folder)
        except Exception as error:  # the suite's point: nothing but NmtError reaches the user
            pytest.fail(f"case {seed} ({what}): {type(error).__name__}: {error}")
        if linked and kind == "package" and "timeline" not in what:  # the timeline is read only when served,
            assert outcome == "refused", f"case {seed} ({what}): a linked file was read"  # where a link gets 403
        outcomes[outcome] += 1
        shutil.rmtree(folder)
    assert outcomes["refused"] > 0 and outcomes["works"] > 0, outcomes  # the mutations reach both ends


@pytest.mark.parametrize("name", ["config.yaml", "manifest.json", "model.safetensors", "spm.en.model", "spm.mr.model"])
def test_any_file_of_a_package_as_a_link_is_refused(originals, tmp_path, name):
    package = tmp_path / "package"
    shutil.copytree(originals["package"], package)
    shutil.copyfile(package / name, tmp_path / name)  # the same bytes, outside: only the link is wrong
    (package / name).unlink()
    (package / name).symlink_to(tmp_path / name)
    with pytest.raises(NmtError, match="symbolic link"):
        load_trained(package, torch.device("cpu"))


# A run folder someone hands you, crafted to run code: its config.yaml names a module it ships
# as a plugin. Before, `python -m nmt export RUN PKG` imported it (python -m puts the working
# folder on the path; so do PYTHONPATH=. and running from inside the folder). No command may.
PAYLOAD = "from pathlib import Path\nPath({marker!r}).write_text('ran', encoding='utf-8')\n"


def crafted_run(originals, root: Path) -> tuple[Path, Path]:
    """A copy of the trained run as ``root/evil_run`` with ``payload.py`` (as a module and as a
    package's) named by its config.yaml; returns it and the file the payload would write."""
    run = root / "evil_run"
    shutil.copytree(originals["run"], run)
    marker = root / "payload-ran.txt"
    (run / "payload.py").write_text(PAYLOAD.format(marker=str(marker)), encoding="utf-8")
    (run / "__init__.py").write_text("", encoding="utf-8")
    return run, marker


def name_plugin(run: Path, name: str) -> None:
    raw = yaml.safe_load((run / "config.yaml").read_text(encoding="utf-8"))
    raw["plugins"] = [name]
    (run / "config.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")


@pytest.mark.parametrize(
    "how",
    ["python -m nmt", "PYTHONPATH=. nmt", "python -m nmt from inside"],
)
@pytest.mark.parametrize(
    "command",
    ["export", "translate --config", "evaluate --config", "init --init-from"],
)
def test_a_crafted_run_folder_runs_no_code_however_nmt_is_called(originals, tmp_path, how, command):
    import os
    import subprocess
    import sys

    run, marker = crafted_run(originals, tmp_path)
    inside = how.endswith("from inside")
    name_plugin(run, "payload" if inside else "evil_run.payload")
    cwd = run if inside else tmp_path
    target = "." if inside else "evil_run"
    write_anki(tmp_path / "eng-mar.tsv", synthetic_pairs())
    args = {
        "export": ["export", target, str(tmp_path / "package")],
        "translate --config": ["translate", "--config", f"{target}/config.yaml", "--text", "hello"],
        "evaluate --config": ["evaluate", "--config", f"{target}/config.yaml"],
        "init --init-from": [
            "init",
            str(tmp_path / "eng-mar.tsv"),
            "--init-from",
            target,
            "--to",
            str(tmp_path / "c.yaml"),
        ],
    }[command]
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    if how.startswith("PYTHONPATH"):
        env["PYTHONPATH"] = "."
        call = [str(Path(sys.executable).with_name("nmt")), *args]
    else:
        call = [sys.executable, "-m", "nmt", *args]
    done = subprocess.run(call, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert not marker.exists(), f"the run's code ran: {done.stderr}"
    assert done.returncode == 1 and "which is code" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert "--plugin" in done.stderr  # and it says how to run it, if the user trusts it
