"""The tutorial "From Bahdanau to the Transformer" runs as written: each `nmt` command of its bash
blocks, shrunk to seconds with --set (a few hundred pairs, 32-wide models, one epoch), from a
folder laid out as `nmt init --example eng-mar` lays it out; the pictures it shows are in docs/."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nmt.cli import app
from nmt.config.recipes import copy_example

ROOT = Path(__file__).resolve().parents[1]
TOUR = ROOT / "docs" / "tutorials" / "bahdanau-to-transformer.md"
runner = CliRunner()
SHRINK = [
    "data.max_pairs=400",
    "data.dev_size=20",
    "data.test_size=20",
    "tokenizer.src_vocab_size=400",
    "tokenizer.tgt_vocab_size=400",
    *(f"model.{key}=32" for key in ("embed_dim", "encoder_hidden", "decoder_hidden", "attention_dim", "output_dim")),
    "model.ff_dim=64",
    "train.epochs=1",
    "train.max_minutes=0",
    "train.probes=0",
]


def commands(text: str) -> list[list[str]]:
    """The `nmt` commands of the page's bash blocks, continuation lines joined."""
    found = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            if line.strip().startswith("nmt "):
                found.append(shlex.split(line.split("#")[0])[1:])
    return found


def shrunk(args: list[str]) -> list[str]:
    """A command with its budget taken out (--minutes N) and the shrinking overrides added."""
    kept = [a for i, a in enumerate(args) if a != "--minutes" and (i == 0 or args[i - 1] != "--minutes")]
    if kept[0] in ("prepare", "train", "translate", "evaluate"):
        kept += [part for key in SHRINK for part in ("--set", key)]
    return kept


@pytest.mark.slow
def test_the_tour_runs_as_written(tmp_path, monkeypatch):
    copy_example("eng-mar", tmp_path)
    monkeypatch.chdir(tmp_path)
    found = commands(TOUR.read_text(encoding="utf-8"))
    assert [args[0] for args in found] == ["train", "train", "train", "export", "export", "export", "serve"]
    for args in found:
        if args[0] == "serve":  # it blocks: the packages it names are what it would serve
            packages = [args[i + 1] for i, a in enumerate(args) if a == "--model"]
            assert len(packages) == 3 and all((tmp_path / p / "manifest.json").is_file() for p in packages)
            continue
        result = runner.invoke(app, shrunk(args))
        assert result.exit_code == 0, (args, result.output)


def test_every_picture_of_the_tour_is_in_the_docs():
    pictures = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", TOUR.read_text(encoding="utf-8"))
    assert len(pictures) >= 4
    for picture in pictures:
        assert (TOUR.parent / picture).resolve().is_file(), picture
