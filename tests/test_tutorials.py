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
        if args[0] == "serve":  # it blocks: the app it builds from the packages answers instead
            packages = [tmp_path / args[i + 1] for i, a in enumerate(args) if a == "--model"]
            served(packages)
            continue
        result = runner.invoke(app, shrunk(args))
        assert result.exit_code == 0, (args, result.output)


def served(packages: list[Path]) -> None:
    """What `nmt serve --model A --model B --model C` serves: the three side by side, each
    translating, and the lab taking the Transformer's heads apart and refusing an RNN's."""
    from nmt.cli.serving import _served
    from nmt.serve.app import build_app

    from .helpers import local_client

    client = local_client(build_app(_served(None, None, None, packages, None, "torch", None)))
    models = {m["name"]: m["arch"] for m in client.get("/api/models").json()["models"]}
    assert models == {"bahdanau": "rnn", "luong": "rnn", "transformer": "transformer"}
    for name in models:
        answer = client.post("/api/translate", json={"text": "Where is the station?", "model": name})
        assert answer.status_code == 200 and answer.json()["translations"], answer.text
    heads = client.post("/api/lab/heads", json={"text": "Where is the station?", "model": "transformer"})
    assert heads.status_code == 200 and len(heads.json()["cross"]) == 2  # the recipe's 2 decoder layers
    refused = client.post("/api/lab/heads", json={"text": "Where is the station?", "model": "bahdanau"})
    assert refused.status_code == 422, refused.text


def test_every_picture_of_the_tour_is_in_the_docs():
    pictures = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", TOUR.read_text(encoding="utf-8"))
    assert len(pictures) >= 4
    for picture in pictures:
        assert (TOUR.parent / picture).resolve().is_file(), picture
