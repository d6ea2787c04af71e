"""The attention lab (nmt/pipelines/lab.py, /api/lab/*, /api/timeline): its numbers are the model's own."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from xml.etree import ElementTree

import pytest
import torch
import yaml
from typer.testing import CliRunner

from nmt.cli import app
from nmt.config.files import load_config
from nmt.config.schema import Config, DecodeConfig
from nmt.data.batching import source_tensor
from nmt.decoding.forced import forced_log_probs
from nmt.model.rnn.model import Seq2Seq
from nmt.pipelines.lab import Lab, LabInputError, spearman
from nmt.pipelines.translate import Translator
from nmt.runtime.loading import LoadedModel, load_checkpoints
from nmt.serve.app import build_app
from nmt.training.timeline import read_timeline

from .helpers import (
    VARIANT_CONFIGS,
    copy_translator,
    local_client,
    model_config,
    random_translator,
    synthetic_pairs,
    tiny_config,
    variant_id,
    write_anki,
)

SENTENCE = "alpha bravo golf delta"


@pytest.fixture(scope="module")
def copying(tmp_path_factory) -> Translator:
    return copy_translator(tmp_path_factory.mktemp("copy"))


@pytest.fixture(scope="module")
def untrained(tmp_path_factory) -> Translator:
    return random_translator(tmp_path_factory.mktemp("random"), beam_size=4)


def with_model(translator: Translator, seed: int = 0, **overrides) -> Translator:
    """The same tokenizers, another (untrained) model."""
    torch.manual_seed(seed)
    config = Config(model=model_config(dropout=0.2, **overrides), decode=translator.loaded.config.decode)
    model = Seq2Seq(config.model, translator.src_tok.vocab_size, translator.tgt_tok.vocab_size).eval()
    return Translator(LoadedModel(config, model, translator.src_tok, translator.tgt_tok, torch.device("cpu")))


def test_spearman_ranks_with_ties():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 1, 2], [5, 5, 9]) == pytest.approx(1.0)
    assert spearman([1, 1, 1], [1, 2, 3]) == 0.0  # constant: no ranking to compare


@pytest.mark.parametrize("beam", [2, 4])
@pytest.mark.parametrize("text", ["I see apples.", "we like tea.", "they eat rice and milk."])
def test_the_trees_ranked_leaves_are_the_n_best_search_returns(untrained, text, beam):
    tree = Lab(untrained).tree(text, beam)
    expected = untrained.search([text], beam_size=beam, n_best=beam)[0]
    nodes = tree.nodes
    ranked = sorted((n for n in nodes if n["rank"]), key=lambda n: n["rank"])
    assert len(ranked) == len(expected)
    for node, hypothesis in zip(ranked, expected):
        assert node["status"] == "ended" and node["score"] == pytest.approx(hypothesis.score)
        path = []
        while node["parent"] is not None:
            path.append(node["token"])
            node = nodes[node["parent"]]
        assert path[::-1] == untrained.tgt_tok.labels(hypothesis.tokens, with_eos=hypothesis.ended)
    for node in nodes[1:]:
        assert nodes[node["parent"]]["status"] in ("kept", "root")  # only live beams are expanded
        assert node["status"] in ("kept", "ended", "pruned")
    for step in {n["step"] for n in nodes[1:]}:
        assert sum(n["step"] == step for n in nodes) <= 2 * beam * beam  # at most 2K per live beam's sentence
    assert any(n["status"] == "pruned" for n in nodes)


@torch.no_grad()
def encoder_states(translator: Translator, text: str) -> torch.Tensor:
    """h_j (S, enc_dim) of the sentence."""
    src, lengths = source_tensor([translator.source_ids([text])[0]])
    memory, _ = translator.model.encode(src, lengths)
    return memory.enc_outputs[0]


@pytest.mark.parametrize("overrides", VARIANT_CONFIGS, ids=variant_id)
def test_playback_shows_the_numbers_the_model_used(untrained, overrides):
    translator = with_model(untrained, **overrides)
    text = "they like books and tea."
    playback = Lab(translator).playback(text)
    best = translator.explain([text], beam_size=4)[0]
    assert playback.tokens == best.translations[0].tokens
    enc_outputs = encoder_states(translator, text)
    ids = translator.source_ids([text])[0]
    targets = translator.tgt_tok.piece_ids([t for t in playback.tokens if t != "<eos>"])
    forced = forced_log_probs(translator.model, *source_tensor([ids]), [targets])[0]
    for step, attention_row, log_prob in zip(playback.steps, best.attention, forced):
        weights = torch.tensor(step.weights)
        assert weights == pytest.approx(torch.tensor(attention_row), abs=1e-5)  # what search recorded
        assert step.probability == pytest.approx(math.exp(log_prob), rel=1e-4)
        context = torch.tensor(step.context)
        if overrides["attention"] == "none":
            continue
        assert context == pytest.approx(weights @ enc_outputs, abs=1e-5)  # c = Σ_j a_j h_j
        if overrides["attention"] == "hard":
            assert step.chosen == int(weights.argmax()) and weights.max() == 1.0
            continue
        scores = torch.tensor([-math.inf if s is None else s for s in step.scores])
        assert weights == pytest.approx(scores.softmax(-1), abs=1e-5)  # a = softmax(e)
        if overrides.get("attention_window", "global") != "global":
            low, high = step.window
            assert all(w == 0 for j, w in enumerate(step.weights) if not low - 1 <= j <= high + 1)
    assert playback.formula and playback.steps[0].top[0]["probability"] >= playback.steps[0].top[-1]["probability"]


def test_playback_of_given_tokens_and_clear_errors(untrained):
    lab = Lab(untrained)
    tokens = untrained.explain(["I see apples."])[0].translations[0].tokens[:2]
    assert lab.playback("I see apples.", tokens).tokens == tokens
    with pytest.raises(LabInputError, match="not a subword") as error:
        lab.playback("I see apples.", ["no-such-piece"])
    assert error.value.field == "tokens"
    with pytest.raises(LabInputError) as error:
        lab.saliency("I see apples.", 99)
    assert error.value.field == "position"


@pytest.mark.slow
def test_an_edit_moves_the_copy_models_output_to_the_attended_word(copying):
    lab = Lab(copying)
    assert copying.translate([SENTENCE]) == [SENTENCE]
    source = lab.playback(SENTENCE).source_tokens  # ▁alpha ▁bravo ▁golf ▁delta <eos>
    one_hot = [0.0] * len(source)
    one_hot[2] = 1.0
    edit = lab.edit(SENTENCE, 0, one_hot)
    assert edit.original[0] == "▁alpha" and edit.edited[0] == "▁golf"  # it follows the attention it is given
    later = [0.0] * len(source)
    later[0] = 5.0  # normalised to 1
    edit = lab.edit(SENTENCE, 2, later)
    assert edit.prefix == ["▁alpha", "▁bravo"] and edit.weights[0] == 1.0
    assert edit.original[0] == "▁golf" and edit.edited[0] == "▁alpha"
    assert edit.original_text == SENTENCE and edit.edited_text.startswith("alpha bravo alpha")
    with pytest.raises(LabInputError) as error:
        lab.edit(SENTENCE, 0, [1.0])
    assert error.value.field == "weights"


@pytest.mark.slow
def test_saliency_is_gradient_times_input_and_zero_where_the_input_is_zero(copying):
    lab = Lab(copying)
    found = lab.saliency(SENTENCE, 2)
    assert len(found.saliency) == len(found.attention) == len(found.source_tokens)
    assert found.rank_correlation == pytest.approx(spearman([abs(s) for s in found.saliency], found.attention))
    assert int(torch.tensor(found.attention).argmax()) == 2  # the copy model attends to the word it copies
    # a source subword whose embedding is zero cannot matter: its gradient x input is exactly 0
    model = copying.model
    golf = copying.src_tok.piece_ids(["▁golf"])[0]
    saved = model.encoder.embedding.weight[golf].clone()
    with torch.no_grad():
        model.encoder.embedding.weight[golf].zero_()
    try:
        assert lab.saliency(SENTENCE, 2).saliency[2] == 0.0
    finally:
        with torch.no_grad():
            model.encoder.embedding.weight[golf] = saved


def test_the_lab_api_answers_each_view_and_names_the_field_it_refuses(untrained):
    client = local_client(build_app({"m": untrained}))
    text = "I see apples."
    tree = client.post("/api/lab/tree", json={"text": text, "beam_size": 3})
    assert tree.status_code == 200 and tree.json()["beam_size"] == 3 and tree.json()["model"] == "m"
    playback = client.post("/api/lab/playback", json={"text": text, "top_k": 3}).json()
    assert len(playback["steps"][0]["top"]) == 3 and playback["steps"][0]["weights"]
    width = len(playback["source_tokens"])
    edit = client.post("/api/lab/edit", json={"text": text, "step": 0, "weights": [1] * width})
    assert edit.status_code == 200, edit.text
    assert client.post("/api/lab/saliency", json={"text": text, "position": 0}).status_code == 200
    for body, view, field in [
        ({"text": text, "step": 0, "weights": [1, 2]}, "edit", "weights"),
        ({"text": text, "step": 500, "weights": [1] * width}, "edit", "step"),
        ({"text": text, "step": 0, "weights": ["x"]}, "edit", "weights"),
        ({"text": text, "position": -1}, "saliency", "position"),
        ({"text": text, "tokens": ["nope"]}, "playback", "tokens"),
        ({"text": ""}, "tree", "text"),
        ({"text": text, "beam_size": 99}, "tree", "beam_size"),
    ]:
        answer = client.post(f"/api/lab/{view}", json=body)
        assert answer.status_code == 422 and answer.json()["field"] == field, (view, body, answer.text)
    assert client.post("/api/lab/nothing", json={"text": text}).json()["field"] == "view"
    missing = client.get("/api/timeline")
    assert missing.status_code == 404 and missing.json()["field"] == "model"


@pytest.mark.slow
def test_training_records_a_timeline_the_api_the_plot_and_the_package_carry(tmp_path):
    data = write_anki(tmp_path / "pairs.txt", synthetic_pairs())
    raw = tiny_config(tmp_path, data, train={"epochs": 3, "probes": 2})
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    runner = CliRunner()
    assert runner.invoke(app, ["train", "--config", str(path)]).exit_code == 0
    config = load_config(path)
    entries = read_timeline(tmp_path / "run" / "timeline.jsonl")
    assert [e["epoch"] for e in entries] == [1, 2, 3] and all(len(e["probes"]) == 2 for e in entries)
    # the last entry is what the final checkpoint translates, greedily
    translator = Translator(load_checkpoints(config, ["last"], torch.device("cpu")))
    for probe in entries[-1]["probes"]:
        ids = translator.src_tok.piece_ids(probe["source_tokens"][:-1])
        found = translator.search([translator.src_tok.decode([ids])[0]], beam_size=1, with_attention=True)[0][0]
        assert probe["tokens"] == translator.tgt_tok.labels(found.tokens, with_eos=found.ended)
        assert torch.tensor(probe["attention"]) == pytest.approx(found.attention, abs=1e-4)
    served = local_client(build_app({"tiny": translator})).get("/api/timeline", params={"model": "tiny"}).json()
    assert served["entries"] == entries
    result = runner.invoke(app, ["plot", str(tmp_path / "run"), "--format", "svg"])
    assert result.exit_code == 0, result.output
    ElementTree.parse(tmp_path / "run" / "timeline.svg")  # parses as SVG
    assert (tmp_path / "run" / "learning_curves.svg").is_file()
    package = tmp_path / "package"
    assert runner.invoke(app, ["export", str(tmp_path / "run"), str(package)]).exit_code == 0
    assert read_timeline(package / "timeline.jsonl") == entries


def test_cli_heatmaps_can_be_svg(tmp_path, untrained, monkeypatch):
    from nmt.cli.translating import _plot_attention

    _plot_attention(untrained, ["I see apples.", "we like tea."], tmp_path / "maps", 5, "svg")
    files = sorted(Path(tmp_path / "maps").glob("*.svg"))
    assert len(files) == 2
    for file in files:
        assert ElementTree.parse(file).getroot().tag.endswith("svg")


def test_decode_config_is_respected_by_the_tree(untrained):
    """The tree runs the search translate runs (same length limit), so its leaves can match."""
    assert isinstance(untrained.loaded.config.decode, DecodeConfig)
    tree = Lab(untrained).tree("I see apples.", 2)
    limit = untrained.loaded.config.decode
    longest = max(n["step"] for n in tree.nodes)
    assert longest <= int(len(tree.source_tokens) * limit.max_len_ratio) + limit.max_len_offset


def test_probes_are_sentences_long_enough_to_show_an_alignment():
    from nmt.training.timeline import probe_sources

    dev = [[5], [5, 6], list(range(8)), [], list(range(30)), list(range(10)), list(range(7))]
    assert probe_sources(dev, 2) == [list(range(8)), list(range(10))]
    assert probe_sources(dev, 4) == [list(range(8)), list(range(10)), list(range(7)), [5]]  # topped up in order
    assert probe_sources(dev, 0) == []


def _fat_record(epoch: int, probes: int = 4, side: int = 12) -> dict:
    grid = [[0.12345] * side for _ in range(side)]
    probe = {"source_tokens": ["▁a"] * side, "tokens": ["▁b"] * side, "translation": "b", "attention": grid}
    return {"epoch": epoch, "step": epoch, "dev_bleu": 1.0, "probes": [{**probe, "heads": [[grid] * 4] * 4}] * probes}


def test_what_training_writes_to_the_timeline_is_bounded_and_stays_evenly_spread(tmp_path, monkeypatch):
    """A 55-second tiny run wrote 32 MB (every head of every probe at hundreds of short epochs)."""
    from nmt.training import timeline as module

    monkeypatch.setattr(module, "FILE_BYTES", 600_000)
    monkeypatch.setattr(module, "RECORD_BYTES", 60_000)
    path = tmp_path / "timeline.jsonl"
    line = len(json.dumps(module.bounded_record(_fat_record(1))))
    assert line <= module.RECORD_BYTES < len(json.dumps(_fat_record(1)))  # each head's weights dropped first
    written = module.Timeline(path)
    for epoch in range(1, 301):
        written.append(_fat_record(epoch))
        assert path.stat().st_size <= module.FILE_BYTES
    epochs = [record["epoch"] for record in module.read_timeline(path)]
    assert epochs[0] == 1 and epochs[-1] == 300 and len(epochs) > 10
    gaps = {b - a for a, b in itertools.pairwise(epochs)}
    assert max(gaps) <= 4 * min(gaps)  # evenly thinned, not the newest alone


def test_the_timeline_endpoint_answers_within_the_lab_bound_however_big_the_file(tmp_path):
    """A timeline written before the bounds (161 MB) was sent whole: four requests took the server
    to 5.2 GB and held a translation 36 s. api.md promises at most 2 MB a lab answer."""
    from nmt.training.timeline import read_timeline_within

    path = tmp_path / "timeline.jsonl"
    with open(path, "w", encoding="utf-8") as handle:  # ~20 MB, as an old run's file may be
        for epoch in range(1, 401):
            handle.write(json.dumps(_fat_record(epoch, probes=2, side=30)) + "\n")
    entries, recorded = read_timeline_within(path, 2_000_000)
    assert recorded == 400 and 1 < len(entries) < 400
    assert entries[0]["epoch"] == 1 and entries[-1]["epoch"] == 400
    assert len(json.dumps(entries)) <= 2_000_000
