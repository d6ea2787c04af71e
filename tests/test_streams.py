"""stdout carries only a command's output, stderr everything else: `nmt translate < in > out`
stays one line out per line in whatever it warns about, and `nmt evaluate --json` prints JSON
alone. Before, a clipped input line put "warning: 1 input line(s) ... clipped" among the
translations (tqdm.write writes to stdout)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml
from typer.testing import CliRunner

from nmt.cli import app

from .helpers import synthetic_pairs, tiny_config, write_anki


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    root = tmp_path_factory.mktemp("streams")
    raw = tiny_config(root, write_anki(root / "pairs.txt", synthetic_pairs()), train={"epochs": 1})
    path = root / "c.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    result = CliRunner().invoke(app, ["train", "--config", str(path)])
    assert result.exit_code == 0, result.output
    return path


def nmt(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "nmt", *args], input=stdin, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.parametrize(
    "options, warned",
    [
        (["--set", "decode.max_input_len=3"], "clipped (decode.max_input_len)"),
        (["--set", "decode.max_input_len=3", "--n-best", "2"], "clipped (decode.max_input_len)"),
        (["--set", "decode.max_input_len=3", "--plot-attention", "plots"], "clipped (decode.max_input_len)"),
    ],
    ids=["clipped", "clipped-n-best", "clipped-with-heatmaps"],
)
def test_translate_from_stdin_writes_only_translations_to_stdout(config, tmp_path, options, warned):
    lines = ["I see apples and water and books and tea and rice.", "we like tea.", ""]
    options = [str(tmp_path / o) if o == "plots" else o for o in options]
    done = nmt("translate", "--config", str(config), *options, stdin="\n".join(lines) + "\n")
    assert done.returncode == 0, done.stderr
    assert warned in done.stderr and "warning" not in done.stdout
    out = done.stdout.splitlines()
    if "--n-best" in options:  # number<TAB>score<TAB>translation, every line numbered
        assert {int(line.split("\t")[0]) for line in out} == {1, 2, 3}, out
    else:
        assert len(out) == len(lines) and out[2] == "", out  # the empty line stays in its place


def test_evaluate_json_prints_only_the_report(config):
    done = nmt("evaluate", "--config", str(config), "--json", "--set", "decode.max_input_len=2")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["num_sentences"] > 0 and "clipped" in done.stderr
