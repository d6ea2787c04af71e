"""Runs and packages written before each model family owned its settings (237828a: one flat
``ModelConfig`` of both families' keys, every one of them saved) load and translate unchanged.

tests/data/legacy holds the four configs that version wrote (a run's and a package's, of each
family). The weights are not kept in the repository: a run and a package trained here are
rewritten in that version's layout — every key of both families in config.yaml, in the
checkpoint's record and in the package's weights metadata (its manifest's hashes updated, as the
export wrote them) — and must translate and score as they did before the rewrite."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
import torch
import yaml
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from nmt.config.parsing import config_from_dict
from nmt.config.schema import ModelConfig
from nmt.core.fileio import sha256_file
from nmt.model.rnn.settings import RnnConfig
from nmt.model.transformer.settings import TransformerConfig
from nmt.pipelines.translate import Translator
from nmt.runtime.loading import MODEL_METADATA, load_trained
from nmt.runtime.package_files import MANIFEST_KEY

from .helpers import small_trained_models, synthetic_pairs
from .test_cli import run

LEGACY = Path(__file__).parent / "data" / "legacy"
CONFIGS = ["rnn-run", "rnn-package", "transformer-run", "transformer-package"]
SHARED = {f.name for f in dataclasses.fields(ModelConfig)}
# keys added since 237828a, read at their defaults from its configs (the published models' shapes)
ADDED_SINCE = {"norm": "pre", "activation": "relu", "scale_embeddings": True, "output_bias": True}
# what 237828a's ModelConfig held: both families' keys at their defaults
OLD_DEFAULTS = {
    **dataclasses.asdict(RnnConfig()),
    **{k: v for k, v in dataclasses.asdict(TransformerConfig()).items() if k not in SHARED | set(ADDED_SINCE)},
}


def old_model_section(model: dict) -> dict:
    """A model section as 237828a wrote it: every key of both families, this model's over the defaults."""
    return {**OLD_DEFAULTS, **model}


def in_the_old_layout(folder: Path) -> None:
    """Rewrite a run or a package trained here as 237828a wrote them."""
    config = yaml.safe_load((folder / "config.yaml").read_text(encoding="utf-8"))
    config["model"] = old_model_section(config["model"])
    (folder / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    checkpoint = folder / "checkpoints" / "best.pt"
    if checkpoint.exists():
        payload = torch.load(checkpoint, weights_only=False)
        payload["config"]["model"] = old_model_section(payload["config"]["model"])
        torch.save(payload, checkpoint.resolve())
        return
    weights = folder / "model.safetensors"
    with safe_open(str(weights), "pt") as handle:
        metadata = dict(handle.metadata())
    metadata[MODEL_METADATA] = json.dumps(old_model_section(json.loads(metadata[MODEL_METADATA])), sort_keys=True)
    save_file(load_file(str(weights)), str(weights), metadata=metadata)
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    manifest[MANIFEST_KEY] = {name: sha256_file(folder / name) for name in manifest[MANIFEST_KEY]}
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> dict[str, Path]:
    return small_trained_models(tmp_path_factory.mktemp("legacy"))


@pytest.mark.parametrize("name", ["rnn-run", "transformer-package"])
def test_a_run_and_a_package_in_the_old_layout_translate_as_they_did(trained, tmp_path, name):
    sources = sorted({source for source, _ in synthetic_pairs()})[:15]
    before = Translator(load_trained(trained[name], torch.device("cpu")))
    expected = before.translate(sources, beam_size=2)
    scores = [h.score for h in before.score(sources, expected)]
    old = shutil.copytree(trained[name], tmp_path / name, symlinks=True)
    in_the_old_layout(old)
    assert "heads" in yaml.safe_load((old / "config.yaml").read_text(encoding="utf-8"))["model"]  # both families'
    translator = Translator(load_trained(old, torch.device("cpu")))
    assert translator.translate(sources, beam_size=2) == expected
    assert [h.score for h in translator.score(sources, expected)] == pytest.approx(scores, abs=1e-5)


@pytest.mark.parametrize("name", CONFIGS)
def test_a_legacy_config_reads_with_each_key_its_family_reads(name):
    """Every config 237828a saved holds both families' keys; what its family reads keeps its value."""
    raw = yaml.safe_load((LEGACY / f"{name}.config.yaml").read_text(encoding="utf-8"))
    saved_model = dict(raw["model"])
    assert set(saved_model) == set(OLD_DEFAULTS)  # the layout this test rewrites runs into
    config = config_from_dict(raw, trained=True)
    model = config.to_dict()["model"]
    assert model["arch"] == saved_model["arch"]
    assert {key: {**ADDED_SINCE, **saved_model}[key] for key in model} == model


def test_the_command_line_translates_with_a_package_in_the_old_layout(trained, tmp_path):
    old = shutil.copytree(trained["transformer-package"], tmp_path / "package")
    in_the_old_layout(old)
    expected = Translator(load_trained(trained["transformer-package"], torch.device("cpu"))).translate(["I see tea."])
    result = run("translate", "--model", str(old), "--text", "I see tea.")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == expected[0]
