"""Adding a cell or an attention is one class and its registry entry (README "Adding a cell",
"Adding an attention"). Both are added here, in this test module and nowhere else, then
validated by the config, checked against their own plain step, and trained end to end by the
``Trainer`` on in-memory data (no prepared files, no SentencePiece)."""

from __future__ import annotations

import math
import random

import pytest
import torch
from torch import nn

from nmt.config.parsing import config_from_dict
from nmt.core.errors import NmtError
from nmt.core.registry import ATTENTIONS, CELLS
from nmt.data.batching import Example
from nmt.model.rnn.attention import SOFT, AttentionKind, DotAttention
from nmt.model.rnn.cells import RecurrentStack
from nmt.training.data import TrainData
from nmt.training.trainer import RunOutput, Trainer

from .helpers import small_model


# ---- the new cell: an Elman RNN, h' = tanh(W x + b + U h + c) ----
class ElmanRNN(RecurrentStack, nn.RNN):
    gates = 1

    @staticmethod
    def reference_cell(inputs, state, *weights):
        return torch.rnn_tanh_cell(inputs, state[0], *weights)

    @staticmethod
    def kernel(input_gates, weight_hh, bias_hh, hidden):
        return torch.tanh(input_gates + torch.addmm(bias_hh, hidden, weight_hh.t()))

    @staticmethod
    def sequence_op(inputs, initial, weights, training, dropout):
        return torch.rnn_tanh(inputs, initial, weights, True, 1, dropout, training, False, True)


# ---- the new attention: scaled dot product, e_j = q · h_j / √d ----
class ScaledDotAttention(DotAttention):
    def score(self, query, keys):
        return super().score(query, keys) / math.sqrt(query.size(-1))


SCALED_DOT = AttentionKind(
    lambda config, query_dim, enc_dim, window: ScaledDotAttention(window),
    "recur-then-attend",
    ("e_j = q · h_j / √d", *SOFT),
    needs_equal_widths=True,
)


@pytest.fixture
def registered(monkeypatch):
    """The two entries, for this test only."""
    monkeypatch.setitem(CELLS, "elman", ElmanRNN)
    monkeypatch.setitem(ATTENTIONS, "scaled-dot", SCALED_DOT)


class DigitTokenizer:
    """What the Trainer asks of a tokenizer, for ids that are their own text."""

    vocab_size = 16
    sha256 = "digits"

    def decode(self, id_lists):
        return [" ".join(str(i) for i in ids) for ids in id_lists]


def copy_task(count: int, seed: int) -> list[Example]:
    """Target = source: sequences of 2 to 5 ids in [4, 16)."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(count):
        ids = [rng.randrange(4, 16) for _ in range(rng.randint(2, 5))]
        pairs.append(Example(ids, list(ids)))
    return pairs


def in_memory_trainer(tmp_path, model_section: dict, epochs: int) -> Trainer:
    raw = {
        "run_dir": str(tmp_path / "run"),
        "data": {"path": str(tmp_path / "unused.tsv")},
        "model": {"embed_dim": 32, "encoder_hidden": 16, "decoder_hidden": 32, "output_dim": 32, **model_section},
        "train": {"epochs": epochs, "batch_size": 16, "learning_rate": 0.01, "patience": 0, "probes": 0, "seed": 3},
        "decode": {"beam_size": 1},
    }
    config = config_from_dict(raw)
    torch.manual_seed(config.train.seed)
    from nmt.model.rnn.model import Seq2Seq

    model = Seq2Seq(config.model, DigitTokenizer.vocab_size, DigitTokenizer.vocab_size)
    train, dev = copy_task(400, seed=1), copy_task(40, seed=2)
    data = TrainData(
        train=train,
        dev=dev,
        dev_sources=[ex.src_ids for ex in dev],
        dev_references=[[" ".join(map(str, ex.tgt_ids))] for ex in dev],
        skipped_long=0,
    )
    tokenizer = DigitTokenizer()
    output = RunOutput(show_bar=False, echo=False)
    return Trainer(config, model, data, (tokenizer, tokenizer), torch.device("cpu"), output=output)


def test_the_config_accepts_registered_names_and_lists_them(registered, tmp_path):
    trainer = in_memory_trainer(tmp_path, {"rnn": "elman", "attention": "scaled-dot"}, epochs=1)
    assert isinstance(trainer.model.encoder.rnn, ElmanRNN) and isinstance(trainer.model.decoder.rnn, ElmanRNN)
    assert isinstance(trainer.model.decoder.attention, ScaledDotAttention)
    with pytest.raises(NmtError, match=r"'model.rnn': got 'elmann', expected one of 'gru', 'lstm', 'elman'"):
        in_memory_trainer(tmp_path, {"rnn": "elmann"}, epochs=1)
    with pytest.raises(NmtError, match=r"must equal 2 x model.encoder_hidden"):  # the entry's capability
        in_memory_trainer(tmp_path, {"attention": "scaled-dot", "decoder_hidden": 24, "output_dim": 24}, epochs=1)


def test_names_not_registered_are_refused(tmp_path):
    with pytest.raises(NmtError, match=r"'model.rnn': got 'elman', expected one of 'gru', 'lstm'"):
        in_memory_trainer(tmp_path, {"rnn": "elman"}, epochs=1)


@pytest.mark.parametrize("attention", ["scaled-dot", "bahdanau"])  # one of each decoder order
def test_the_new_cell_fast_path_equals_its_plain_step(registered, attention):
    model = small_model(seed=4, rnn="elman", attention=attention, decoder_layers=2, decoder_hidden=32).double()
    src, lengths = torch.randint(4, 20, (3, 5)), torch.tensor([5, 3, 1])
    tgt_in = torch.randint(4, 20, (3, 4))
    memory, state = model.encode(src, lengths)
    fast, _ = model.decoder.teacher_forced(tgt_in, state, memory)
    plain = []
    for t in range(4):
        logits, state, _ = model.decoder.reference_step(tgt_in[:, t], state, memory)
        plain.append(logits)
    assert torch.allclose(fast, torch.stack(plain, 1), atol=1e-12)


@pytest.mark.slow
def test_a_registered_cell_and_attention_train_to_copy(registered, tmp_path):
    trainer = in_memory_trainer(tmp_path, {"rnn": "elman", "attention": "scaled-dot"}, epochs=12)
    trainer.run()
    records = trainer.metrics.read()
    assert records[-1]["train_loss"] < 0.3 * records[0]["train_loss"], records
    assert trainer.progress.best_bleu > 80, records  # it copies
    assert trainer.run_dir.checkpoint("best").is_file()
