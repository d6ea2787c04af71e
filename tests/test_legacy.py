"""Runs and packages written before each model family owned its settings (237828a: one flat
``ModelConfig`` of both families' keys, every one of them saved) load and translate unchanged:
the same translations and scores as that version recorded (scripts/dev/record_legacy_fixtures.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
import yaml

from nmt.config.parsing import config_from_dict
from nmt.pipelines.translate import Translator
from nmt.runtime.loading import load_trained

from .test_cli import run

LEGACY = Path(__file__).parent / "data" / "legacy"
EXPECTED = json.loads((LEGACY / "expected.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", ["rnn-run", "transformer-package"])
def test_a_legacy_run_and_package_translate_as_they_did(tmp_path, name):
    folder = shutil.copytree(LEGACY / name, tmp_path / name)  # elsewhere than where it was written
    expected = EXPECTED[name]
    translator = Translator(load_trained(folder, torch.device("cpu")))
    assert translator.translate(expected["sources"], beam_size=2) == expected["beam_2"]
    scores = [h.score for h in translator.score(expected["sources"], expected["beam_2"])]
    assert scores == pytest.approx(expected["scores"], abs=2e-3)


@pytest.mark.parametrize(
    "path",
    [
        "rnn-run/config.yaml",
        "rnn-package.config.yaml",
        "transformer-run.config.yaml",
        "transformer-package/config.yaml",
    ],
)
def test_a_legacy_config_reads_with_each_key_its_family_reads(path):
    """Every legacy config saved both families' keys; what its family reads keeps its value."""
    raw = yaml.safe_load((LEGACY / path).read_text(encoding="utf-8"))
    saved_model = dict(raw["model"])
    config = config_from_dict(raw, trained=True)
    model = config.to_dict()["model"]
    assert model["arch"] == saved_model["arch"]
    assert {key: saved_model[key] for key in model} == model


def test_the_command_line_translates_with_a_legacy_package(tmp_path):
    folder = shutil.copytree(LEGACY / "transformer-package", tmp_path / "package")
    result = run("translate", "--model", str(folder), "--text", "I see tea.", "--beam-size", "2")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == EXPECTED["transformer-package"]["beam_2"][0]
