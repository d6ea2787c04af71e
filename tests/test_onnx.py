"""ONNX export (nmt export --onnx) and the onnx engine (--engine onnx): every variant against
PyTorch, through the CLI and the JSON API, and the errors a user can meet."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
import yaml
from typer.testing import CliRunner

from nmt.cli import app
from nmt.core.errors import NmtError
from nmt.decoding.search import beam_search, greedy_search
from nmt.export.onnx_graphs import export_graphs
from nmt.model.graphs import state_names
from nmt.model.rnn.graphs import flatten_state, unflatten_state
from nmt.runtime.loading import load_packages
from nmt.runtime.onnx_engine import OnnxModel, graph_file

from .helpers import (
    CELL_VARIANT_CONFIGS,
    random_sources,
    served_beside_torch,
    small_model,
    synthetic_pairs,
    tiny_config,
    variant_id,
)
from .helpers import write_anki as write_pairs

pytest.importorskip("onnxruntime")
runner = CliRunner()
EXTRA_VARIANTS = [  # the model's other options that change its graphs
    dict(attention="bahdanau", tie_embeddings=True),
    dict(attention="luong-concat", input_feeding=True, bridge="both", encoder_layers=2),
]


class _Settings:
    def __init__(self, model_config):
        self.model = model_config


def exported(model, root: Path) -> OnnxModel:
    export_graphs(model, root)
    return OnnxModel(root, _Settings(model.config))


@pytest.mark.parametrize("overrides", CELL_VARIANT_CONFIGS + EXTRA_VARIANTS, ids=variant_id)
def test_every_variant_exports_with_the_same_tokens_attention_and_log_probs(overrides, tmp_path):
    model = small_model(vocab=24, dim=16, **overrides).eval()
    onnx = exported(model, tmp_path)
    src, lengths = random_sources(6, vocab=24)
    want = greedy_search(model, src, lengths, 12, with_attention=True)
    got = greedy_search(onnx, src, lengths, 12, with_attention=True)
    for expected, found in zip(want, got):
        assert found[0].tokens == expected[0].tokens
        assert torch.allclose(
            torch.tensor(found[0].token_logprobs), torch.tensor(expected[0].token_logprobs), atol=1e-5
        )
        if expected[0].attention is not None:
            assert torch.allclose(found[0].attention, expected[0].attention, atol=1e-5)


@pytest.mark.parametrize(
    "overrides",
    [dict(attention="bahdanau"), dict(attention="luong-general", rnn="lstm", input_feeding=True, decoder_layers=2)],
    ids=variant_id,
)
def test_beam_search_n_best_matches_with_scores(overrides, tmp_path):
    model = small_model(vocab=24, dim=16, **overrides).eval()
    onnx = exported(model, tmp_path)
    src, lengths = random_sources(5, vocab=24, seed=3)
    want = beam_search(model, src, lengths, 4, 12, n_best=3)
    got = beam_search(onnx, src, lengths, 4, 12, n_best=3)
    for expected, found in zip(want, got):
        assert [h.tokens for h in found] == [h.tokens for h in expected]
        assert [h.score for h in found] == pytest.approx([h.score for h in expected], abs=1e-4)


def test_the_flat_state_round_trips(tmp_path):
    model = small_model(rnn="lstm", decoder_layers=2, attention="luong-general", input_feeding=True).eval()
    src, lengths = random_sources(3)
    _, state = model.encode(src, lengths)
    assert state_names(model.config) == ["h_0", "c_0", "h_1", "c_1", "feed"]
    flat = flatten_state(state)
    again = unflatten_state(flat, model.config, 0)
    assert all(torch.equal(a, b) for a, b in zip(flatten_state(again), flat))


# ---- through the CLI and the API ----


@pytest.fixture(scope="module")
def package(tmp_path_factory) -> Path:
    """A tiny trained run, exported with its ONNX graphs."""
    tmp_path = tmp_path_factory.mktemp("onnx-run")
    data = write_pairs(tmp_path / "pairs.tsv", synthetic_pairs())
    config = tmp_path / "tiny.yaml"
    raw = tiny_config(tmp_path, data, train={"epochs": 6})
    config.write_text(yaml.safe_dump(raw), encoding="utf-8")
    assert runner.invoke(app, ["train", "--config", str(config)]).exit_code == 0
    result = runner.invoke(app, ["export", raw["run_dir"], str(tmp_path / "pkg"), "--onnx"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["export", raw["run_dir"], str(tmp_path / "plain")])
    assert result.exit_code == 0, result.output
    return tmp_path / "pkg"


SENTENCES = "I see apples.\nwe like tea.\n\nthey eat rice.\n"


def test_the_package_holds_the_graphs_and_the_manifest_says_how_they_were_made(package):
    manifest = json.loads((package / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["onnx"]["exporter"].startswith("torch.onnx.export") and manifest["onnx"]["opset"] >= 17
    assert manifest["onnx"]["decoder_step"]["outputs"][:2] == ["logits", "attention"]
    assert graph_file(package, "encoder").is_file() and graph_file(package, "decoder_step").is_file()
    assert manifest["parameters"] > 1000
    # onnxruntime's workers sleep between calls: spinning, they took the cores from the search between steps
    onnx = load_packages([package], torch.device("cpu"), "onnx").model
    assert onnx.decoder.get_session_options().get_session_config_entry("session.intra_op.allow_spinning") == "0"


@pytest.mark.parametrize("beam", ["1", "3"])
def test_translate_with_the_onnx_engine_gives_pytorchs_translations(package, beam):
    torch_out = runner.invoke(app, ["translate", "--model", str(package), "--beam-size", beam], input=SENTENCES)
    onnx_out = runner.invoke(
        app, ["translate", "--model", str(package), "--engine", "onnx", "--beam-size", beam], input=SENTENCES
    )
    assert torch_out.exit_code == 0 and onnx_out.exit_code == 0, onnx_out.output
    assert onnx_out.output == torch_out.output
    assert len(onnx_out.output.split("\n")) == len(SENTENCES.split("\n"))


def test_the_json_api_on_the_onnx_engine(package):
    models = served_beside_torch(package, "onnx", score_abs=1e-4, attention_atol=1e-5)
    assert models["onnx"]["engine"] == "onnx" and models["torch"]["engine"] == "torch"
    assert models["onnx"]["parameters"] == models["torch"]["parameters"]


def test_a_package_without_graphs_or_the_engine_without_a_package_is_a_clear_error(package, tmp_path):
    plain = package.parent / "plain"
    with pytest.raises(NmtError, match=r"no ONNX graphs .*nmt export RUN .* --onnx"):
        load_packages([plain], torch.device("cpu"), "onnx")
    result = runner.invoke(app, ["translate", "--model", str(plain), "--engine", "onnx"], input="we like tea.\n")
    assert result.exit_code == 1 and "nmt export RUN" in result.output and "Traceback" not in result.output
    result = runner.invoke(app, ["translate", "--config", "configs/tiny.yaml", "--engine", "onnx"], input="x\n")
    assert result.exit_code == 1 and "give --model PKG" in result.output
    result = runner.invoke(app, ["translate", "--model", str(package), "--engine", "tensorrt"], input="x\n")
    assert result.exit_code == 1 and "one of torch, " in result.output and "onnx" in result.output
    with pytest.raises(NmtError, match="one package"):
        load_packages([package, package], torch.device("cpu"), "onnx")


def test_without_onnxruntime_export_and_the_engine_say_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # as if the extra were not installed
    with pytest.raises(NmtError, match=r"pip install 'nmt-kit\[onnx\]'"):
        export_graphs(small_model().eval(), tmp_path)
    assert not list(tmp_path.iterdir())  # refused before anything is written
    with pytest.raises(NmtError, match=r"pip install 'nmt-kit\[onnx\]'"):
        OnnxModel(tmp_path, _Settings(small_model().config))


@pytest.mark.parametrize("wrapped", [False, True], ids=["raised", "wrapped-by-the-exporter"])
def test_a_full_disk_during_export_is_named_as_the_disk_not_the_model(package, tmp_path, monkeypatch, wrapped):
    """Before: "The model variant ... cannot be exported to ONNX: [Errno 28] No space left on device"."""
    import errno

    import nmt.export.onnx_graphs as onnx_graphs

    def full_disk(*args, **kwargs):
        error = OSError(errno.ENOSPC, "No space left on device")
        if not wrapped:
            raise error
        try:
            raise error
        except OSError as cause:
            raise RuntimeError("the exporter failed") from cause

    monkeypatch.setattr(onnx_graphs.torch.onnx, "export", full_disk)
    run_dir = package.parent / "run"
    result = runner.invoke(app, ["export", str(run_dir), str(tmp_path / "out"), "--onnx"])
    assert result.exit_code == 1 and "the disk is full (No space left on device)" in result.output, result.output
    assert "cannot be exported" not in result.output and "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


TRANSFORMER_VARIANTS = [
    dict(),
    dict(positions="learned", tie_embeddings=True, encoder_layers=1, decoder_layers=3),
]


@pytest.mark.parametrize("overrides", TRANSFORMER_VARIANTS, ids=lambda o: variant_id(o) or "default")
def test_a_transformer_exports_with_its_cache_and_searches_as_pytorch(overrides, tmp_path):
    """The decoder step takes and returns each layer's key/value cache: greedy and beam search on
    onnxruntime find PyTorch's hypotheses, scores and attention, and the step's every-layer heads
    average to the attention search reads."""
    from nmt.model.base import build_model

    from .test_transformer import transformer_config

    torch.manual_seed(1)
    model = build_model(transformer_config(**overrides), 24, 24).eval()
    onnx = exported(model, tmp_path)
    src, lengths = random_sources(6, vocab=24, seed=2)
    for found, expected in zip(
        greedy_search(onnx, src, lengths, 12, with_attention=True),
        greedy_search(model, src, lengths, 12, with_attention=True),
    ):
        assert found[0].tokens == expected[0].tokens
        assert found[0].token_logprobs == pytest.approx(expected[0].token_logprobs, abs=1e-5)
        assert torch.allclose(found[0].attention, expected[0].attention, atol=1e-5)
    want = beam_search(model, src, lengths, 4, 12, n_best=3)
    got = beam_search(onnx, src, lengths, 4, 12, n_best=3)
    for expected, found in zip(want, got):
        assert [h.tokens for h in found] == [h.tokens for h in expected]
        assert [h.score for h in found] == pytest.approx([h.score for h in expected], abs=1e-4)
    import onnxruntime

    session = onnxruntime.InferenceSession(
        str(graph_file(tmp_path, "decoder_step")), providers=["CPUExecutionProvider"]
    )
    memory, state = onnx.encode(src, lengths)
    feeds = dict(zip(onnx.step_names, [src[:, 0] * 0 + 2, torch.tensor([0]), *memory.tensors, *state.tensors]))
    outputs = dict(
        zip([o.name for o in session.get_outputs()], session.run(None, {k: v.numpy() for k, v in feeds.items()}))
    )
    layers = model.config.decoder_layers
    assert outputs["heads"].shape == (6, layers, 4, src.size(1))
    assert torch.allclose(
        torch.from_numpy(outputs["heads"][:, -1].mean(1)), torch.from_numpy(outputs["attention"]), atol=1e-6
    )
