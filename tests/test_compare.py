"""``nmt compare`` and ``nmt.compare_attentions``: attentions trained on one's own pairs within a
shared budget, each scored (BLEU, chrF) and held against eflomal (AER; a Transformer's every head),
as a table, a JSON file beside the runs and a view; a finished variant is reused."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

import nmt
from nmt.cli import app

from .helpers import synthetic_pairs, tiny_config, write_anki

pytest.importorskip("eflomal")
runner = CliRunner()


@pytest.mark.slow
def test_compare_trains_scores_and_aligns_each_variant_and_reuses_a_finished_one(tmp_path):
    pairs = write_anki(tmp_path / "pairs.txt", synthetic_pairs())
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(tiny_config(tmp_path, pairs, train={"epochs": 2, "probes": 0})), "utf-8")
    args = ["compare", "--config", str(config), "--attention", "bahdanau", "--attention", "luong-general"]
    result = runner.invoke(app, [*args, "--transformer", "--minutes", "3", "--set", "model.heads=2"])
    assert result.exit_code == 0, result.output
    table = result.stdout.splitlines()
    assert [line.split()[0] for line in table[1:4]] == ["bahdanau", "luong-general", "transformer"]
    assert "its best head: layer" in result.stdout
    found = json.loads((tmp_path / "run-compare" / "compare.json").read_text(encoding="utf-8"))
    rows = {row["name"]: row for row in found["variants"]}
    assert all(0 <= row["aer"] <= 1 and row["bleu"] >= 0 for row in rows.values())
    assert "heads" not in rows["bahdanau"] and len(rows["transformer"]["heads"]) == 2  # layers x heads
    assert all(len(layer) == 2 for layer in rows["transformer"]["heads"])
    best = tmp_path / "run-compare" / "bahdanau" / "checkpoints" / "best.pt"
    trained_at = best.stat().st_mtime_ns
    again = runner.invoke(app, [*args, "--minutes", "3", "--json"])
    assert again.exit_code == 0, again.output
    assert best.stat().st_mtime_ns == trained_at  # reused, not trained again
    assert [row["name"] for row in json.loads(again.stdout)["variants"]] == ["bahdanau", "luong-general"]
    view = nmt.compare_attentions(config, ["bahdanau", "luong-general"], minutes=3)  # the function, as a view
    assert view.kind == "variants" and view.data == json.loads(again.stdout)


def test_compare_refuses_what_it_cannot_compare_before_any_work(tmp_path):
    pairs = write_anki(tmp_path / "pairs.txt", synthetic_pairs())
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(tiny_config(tmp_path, pairs)), "utf-8")
    for args, message in (
        (["--attention", "bahdanau"], "at least two variants"),
        (["--attention", "bahdanu", "--attention", "hard"], "not a registered attention"),
        (["--attention", "bahdanau", "--transformer", "--minutes", "0"], "--minutes"),
    ):
        result = runner.invoke(app, ["compare", "--config", str(config), *args])
        assert result.exit_code == 1 and message in result.output, result.output
    assert not (tmp_path / "run").exists()
