"""Guided alignment (train.guided_alignment): eflomal's links carried down to subwords, the loss
between them and the attention, and a toy task where it makes the attention align."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import yaml
from typer.testing import CliRunner

from nmt.cli import app
from nmt.config.files import load_config
from nmt.config.schema import TrainConfig
from nmt.core.errors import NmtError
from nmt.data.alignments import Links, agreement, piece_links, word_of_pieces
from nmt.data.batching import Example, collate, padded_to_bucket
from nmt.pipelines.align import model_alignments, target_ids
from nmt.pipelines.translate import Translator
from nmt.runtime.loading import load_checkpoints
from nmt.training.step import alignment_loss, train_step

from .helpers import TINY_TRANSFORMER, model_config, small_model, synthetic_pairs, tiny_config, write_anki

runner = CliRunner()


def test_word_links_reach_every_subword_of_the_linked_words():
    source = word_of_pieces(["▁the", "▁dog", "s", "▁ran"])  # words 0, 1, 1, 2
    target = word_of_pieces(["▁कु", "त्ते", "▁दौड़े"])  # words 0, 0, 1
    found = piece_links(Links({(1, 0), (2, 1)}, {(0, 0)}), source, target)
    # target word 0 (pieces 0 and 1) -> source words 0 and 1 (pieces 0, 1, 2); word 1 -> source word 2 (piece 3)
    expected = {(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2), (2, 3)}
    assert {tuple(row) for row in found.tolist()} == expected
    assert piece_links(Links(), source, target).shape == (0, 2)


def test_the_guide_spreads_each_positions_reference_evenly_and_leaves_the_rest_zero():
    examples = [
        Example([5, 6, 7], [8, 9], np.array([[0, 0], [0, 2], [1, 1]], dtype=np.int32)),
        Example([5], [8, 9, 10], np.zeros((0, 2), dtype=np.int32)),
    ]
    batch = collate(examples)
    assert batch.guide is not None and batch.guide.shape == (2, 4, 4)  # (B, T incl. <eos>, S incl. <eos>)
    assert batch.guide[0, 0].tolist() == [0.5, 0.0, 0.5, 0.0]
    assert batch.guide[0, 1].tolist() == [0.0, 1.0, 0.0, 0.0]
    assert batch.guide[0, 2:].abs().sum() == 0 and batch.guide[1].abs().sum() == 0  # <eos>, no links: unguided
    grown = padded_to_bucket(batch, 4, 8, 8)
    assert grown.guide is not None and grown.guide.shape == (4, 8, 8)
    assert torch.equal(grown.guide[:2, :4, :4], batch.guide) and grown.guide[2:].abs().sum() == 0
    assert collate([Example([5], [6])]).guide is None


def test_the_alignment_loss_is_the_cross_entropy_with_the_reference():
    attention = torch.tensor([[[0.5, 0.25, 0.25], [0.1, 0.8, 0.1]]])
    guide = torch.tensor([[[0.5, 0.5, 0.0], [0.0, 0.0, 0.0]]])  # the second position has no links
    expected = -(0.5 * np.log(0.5) + 0.5 * np.log(0.25))
    assert alignment_loss(attention, guide).item() == pytest.approx(expected, rel=1e-6)


def guided_batch(model_vocab: int = 20):
    src = [[5, 6, 7], [8, 9, 10]]
    tgt = [[11, 12, 13], [14, 15, 16]]
    reversed_links = np.array([[0, 2], [1, 1], [2, 0]], dtype=np.int32)  # target word t <- source word 2 - t
    return collate([Example(s, t, reversed_links) for s, t in zip(src, tgt)])


@pytest.mark.parametrize("family", ["rnn", "transformer"])
def test_guided_steps_pull_the_guided_attention_toward_the_links(family):
    from nmt.model.transformer.model import Transformer

    torch.manual_seed(0)
    model = small_model(dim=16) if family == "rnn" else Transformer(model_config(**TINY_TRANSFORMER), 20, 20)
    batch = guided_batch()
    assert batch.guide is not None
    cfg = TrainConfig(guided_alignment=1.0, clip_grad_norm=0.0)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

    def distance() -> float:
        with torch.no_grad():
            _, attention = model.guided_forward(batch.src, batch.src_lengths, batch.tgt_in)
        return alignment_loss(attention, batch.guide).item()

    before = distance()
    for _ in range(30):
        train_step(model, batch, optimizer, cfg, tokens=batch.num_tgt_tokens)
    assert distance() < 0.5 * before
    if family == "transformer":  # the guided head is the first head of the aligning layer
        model.eval()
        with torch.no_grad():
            memory = model.decoder.memory(model.encoder(batch.src, batch.src.ne(0)), batch.src.ne(0))
            every = model.decoder.cross_weights(batch.tgt_in, memory)
            _, guided = model.guided_forward(batch.src, batch.src_lengths, batch.tgt_in)
        assert torch.allclose(guided, every[-2][:, 0])


def test_guided_alignment_trains_one_process_and_refuses_what_it_cannot_guide(tmp_path):
    wrapped = torch.nn.Sequential(small_model())  # stands for DDP's wrapper: not the model itself
    optimizer = torch.optim.Adam(wrapped.parameters())
    with pytest.raises(NmtError, match="without torchrun"):
        train_step(wrapped, guided_batch(), optimizer, TrainConfig(guided_alignment=1.0), tokens=6)
    pairs = write_anki(tmp_path / "pairs.tsv", synthetic_pairs())
    for extra, message in [
        ({"train": {"guided_alignment": 1.0, "subword_sampling": 0.1}}, "not with 'train.subword_sampling'"),
        ({"train": {"guided_alignment": -1.0}}, "a number from 0"),
        ({"train": {"guided_alignment": 1.0}, "model": {"attention": "hard"}}, "one position a step"),
    ]:
        raw = tiny_config(tmp_path, pairs, **extra)
        path = tmp_path / "c.yaml"
        path.write_text(yaml.safe_dump(raw), encoding="utf-8")
        result = runner.invoke(app, ["train", "--config", str(path)])
        assert result.exit_code != 0 and message in result.output, result.output


def aer_after_training(tmp_path, guided: float) -> float:
    pairs = synthetic_pairs()
    raw = tiny_config(
        tmp_path,
        write_anki(tmp_path / "pairs.tsv", pairs),
        run_dir=str(tmp_path / f"run{guided}"),
        model=dict(TINY_TRANSFORMER, heads=2),
        train={"epochs": 12, "guided_alignment": guided, "probe_alignment": 20},
    )
    path = tmp_path / f"c{guided}.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    result = runner.invoke(app, ["train", "--config", str(path)])
    assert result.exit_code == 0, result.output
    config = load_config(path)
    translator = Translator(load_checkpoints(config, ["last"], torch.device("cpu")), None, config.decode)
    distinct = sorted(set(pairs))
    sources, targets = [s for s, _ in distinct], [t for _, t in distinct]
    found = model_alignments(translator, sources, target_ids(translator, targets))
    gold = [Links({(0, 0), (1, 2), (2, 1)}) for _ in distinct]  # S V O. -> S O V.
    return agreement(gold, found).aer


def test_guided_alignment_makes_a_transformer_align_on_a_toy_task(tmp_path, monkeypatch):
    """Same run, same epochs: unguided, the attention has not found the reordering; guided
    toward eflomal's links it has."""
    pytest.importorskip("eflomal")
    unguided = aer_after_training(tmp_path, 0.0)
    guided = aer_after_training(tmp_path, 1.0)
    assert guided < 0.2 and guided < unguided - 0.3, (guided, unguided)
    # the timeline holds the agreement at each validation (train.probe_alignment): alignment forming
    records = [json.loads(line) for line in (tmp_path / "run1.0" / "timeline.jsonl").read_text().splitlines()]
    forming = [r["alignment"]["aer"] for r in records if r["epoch"] > 0]
    assert len(forming) == 12 and all(0 < r["alignment"]["pairs"] <= 20 for r in records)
    assert forming[-1] < 0.2 and forming[-1] < forming[0] - 0.3, forming
    assert "AER" in (tmp_path / "run1.0" / "train.log").read_text(encoding="utf-8")
    # a resumed or retrained run reads the links the run folder keeps: eflomal runs once
    from nmt.data import alignments

    monkeypatch.setattr(alignments, "eflomal_alignments", lambda *a, **k: pytest.fail("eflomal ran again"))
    links = (tmp_path / "run1.0" / "train.eflomal.align").read_text(encoding="utf-8").splitlines()
    # eflomal samples, unseeded: nearly every pair's links are the reordering, not always all of them
    assert links and sum(line == "0-0 1-2 2-1" for line in links) >= 0.8 * len(links)
    result = runner.invoke(
        app, ["train", "--config", str(tmp_path / "c1.0.yaml"), "--resume", "--set", "train.epochs=13"]
    )
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("setting", ["train.probe_alignment=5", "train.guided_alignment=0.1"])
def test_without_eflomal_the_settings_that_run_it_are_refused_before_any_work(tmp_path, monkeypatch, setting):
    """A probe trained a whole epoch (and guided alignment prepared the data) before eflomal was
    found missing; evaluate --align translated every sentence first."""
    import sys

    monkeypatch.setitem(sys.modules, "eflomal", None)  # `import eflomal` raises ImportError
    data = write_anki(tmp_path / "pairs.tsv", synthetic_pairs())
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(tiny_config(tmp_path, data)), encoding="utf-8")
    result = runner.invoke(app, ["train", "--config", str(config), "--set", setting])
    assert result.exit_code == 1 and "eflomal" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "run" / "data").exists() and not (tmp_path / "run" / "checkpoints").exists()


def test_without_eflomal_evaluate_align_translates_nothing_first(tmp_path, monkeypatch):
    import sys

    translator_made = []
    monkeypatch.setitem(sys.modules, "eflomal", None)
    monkeypatch.setattr("nmt.cli.translating.open_translator", lambda *a, **k: translator_made.append(1))
    result = runner.invoke(app, ["evaluate", "--config", str(tmp_path / "any.yaml"), "--align"])
    assert result.exit_code == 1 and "eflomal" in result.output and translator_made == []


def test_a_guided_weight_past_any_measured_use_is_refused_by_name():
    """1e30 trained until a non-finite loss said "Lower train.learning_rate"."""
    from nmt.config.parsing import config_from_dict

    with pytest.raises(NmtError, match=r"train\.guided_alignment.*from 0 \(off\) to 100"):
        config_from_dict({"train": {"guided_alignment": 1e30}})
