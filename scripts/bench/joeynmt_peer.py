"""JoeyNMT 2.3.0 on this project's prepared data, for side-by-side benchmarks.

Used by bench_train.py and bench_decode.py when ``joeynmt`` is importable:

    pip install joeynmt==2.3.0 --no-deps
    pip install importlib-metadata tensorboard subword-nmt   # what it imports at start-up

JoeyNMT's own model classes, loss, training step and search run here on the same
SentencePiece ids as ours (JoeyNMT puts <unk> at 0 and <pad> at 1; ours are the other
way round, so those two ids are swapped on the way in).

The equivalent of JoeyNMT's recurrent model in this project is Luong-ordered with
input feeding and additive ("bahdanau") scoring of the current state:
``model.attention=luong-concat, model.input_feeding=true`` (EQUIVALENT_OVERRIDES).

With ``model.arch: transformer`` the peer is JoeyNMT's Transformer of the same sizes: pre-norm
layers, ``model.heads`` heads, ``model.ff_dim`` wide feed-forward, sinusoidal positions, scaled
embeddings. JoeyNMT uses one dropout everywhere: TRANSFORMER_OVERRIDES sets ours alike (the
embeddings, residuals, attention weights and feed-forward activations) at its value.
"""

from __future__ import annotations

import importlib.util
from types import SimpleNamespace

import torch

from nmt.config.schema import ModelConfig
from nmt.data.batching import Example

AVAILABLE = importlib.util.find_spec("joeynmt") is not None
EQUIVALENT_OVERRIDES = ["model.attention=luong-concat", "model.input_feeding=true"]
JOEY_UNK, JOEY_PAD, JOEY_BOS, JOEY_EOS = 0, 1, 2, 3
# JoeyNMT's Transformer in ../shared/peers/joeynmt.md: 3 + 3 pre-norm layers, 256 wide, 4 heads,
# feed-forward 1024, dropout 0.3 wherever it falls
TRANSFORMER_OVERRIDES = [
    "model.arch=transformer",
    "model.embed_dim=256",
    "model.encoder_layers=3",
    "model.decoder_layers=3",
    "model.heads=4",
    "model.ff_dim=1024",
    "model.dropout=0.3",
    "model.attention_dropout=0.3",
    "model.activation_dropout=0.3",
    "model.positions=sinusoidal",
]


def _joey_ids(ids: list[int]) -> list[int]:
    return [{0: JOEY_PAD, 1: JOEY_UNK}.get(i, i) for i in ids]


def _pad(rows: list[list[int]]) -> torch.Tensor:
    out = torch.full((len(rows), max(len(r) for r in rows)), JOEY_PAD, dtype=torch.long)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.tensor(row)
    return out


def model_config(model: ModelConfig) -> dict:
    """JoeyNMT's recurrent model with our sizes (shared/peers/joeynmt-rnn-eng-mar.yaml), or its
    Transformer (``model.arch: transformer``)."""
    if model.arch == "transformer":
        return transformer_config(model)
    embeddings = {"embedding_dim": model.embed_dim, "scale": False}
    return {
        "initializer": "xavier_uniform",
        "bias_initializer": "zeros",
        "init_gain": 1.0,
        "embed_initializer": "normal",
        "embed_init_weight": 0.1,
        "tied_embeddings": False,
        "tied_softmax": False,
        "encoder": {
            "type": "recurrent",
            "rnn_type": "gru",
            "embeddings": embeddings,
            "hidden_size": model.encoder_hidden,
            "bidirectional": True,
            "dropout": model.dropout,
            "num_layers": model.encoder_layers,
        },
        "decoder": {
            "type": "recurrent",
            "rnn_type": "gru",
            "embeddings": dict(embeddings),
            "hidden_size": model.decoder_hidden,
            "dropout": model.dropout,
            "hidden_dropout": model.dropout,
            "num_layers": 1,
            "input_feeding": True,
            "init_hidden": "bridge",
            "attention": "bahdanau",
        },
    }


def transformer_config(model: ModelConfig) -> dict:
    """JoeyNMT's Transformer with our sizes (pre-norm, as in shared/peers/joeynmt.md)."""

    def side(layers: int) -> dict:
        return {
            "type": "transformer",
            "num_layers": layers,
            "num_heads": model.heads,
            "embeddings": {"embedding_dim": model.embed_dim, "scale": True},
            "hidden_size": model.embed_dim,
            "ff_size": model.ff_dim,
            "dropout": model.dropout,
            "layer_norm": "pre",
        }

    return {
        "initializer": "xavier_uniform",
        "bias_initializer": "zeros",
        "init_gain": 1.0,
        "embed_initializer": "xavier_uniform",
        "embed_init_gain": 1.0,
        "tied_embeddings": False,
        "tied_softmax": model.tie_embeddings,
        "encoder": side(model.encoder_layers),
        "decoder": side(model.decoder_layers),
    }


def build(model: ModelConfig, src_vocab_size: int, tgt_vocab_size: int, device: torch.device):
    import logging

    from joeynmt.model import build_model
    from joeynmt.vocabulary import Vocabulary

    logging.getLogger("joeynmt").setLevel(logging.WARNING)
    specials = SimpleNamespace(
        unk_token="<unk>",
        pad_token="<pad>",
        bos_token="<bos>",
        eos_token="<eos>",
        unk_id=JOEY_UNK,
        pad_id=JOEY_PAD,
        bos_id=JOEY_BOS,
        eos_id=JOEY_EOS,
        lang_tags=[],
        sep_token=None,
        sep_id=None,
    )
    src_vocab = Vocabulary([f"src{i}" for i in range(4, src_vocab_size)], specials)
    tgt_vocab = Vocabulary([f"tgt{i}" for i in range(4, tgt_vocab_size)], specials)
    joey = build_model(model_config(model), src_vocab, tgt_vocab)
    joey.loss_function = ("crossentropy", 0.0)
    return joey.to(device)


def make_batch(examples: list[Example], device: torch.device, with_target: bool = True):
    from joeynmt.batch import Batch

    src = _pad([_joey_ids(ex.src_ids) + [JOEY_EOS] for ex in examples])
    src_length = torch.tensor([len(ex.src_ids) + 1 for ex in examples])
    trg = _pad([[JOEY_BOS] + _joey_ids(ex.tgt_ids) + [JOEY_EOS] for ex in examples]) if with_target else None
    return Batch(src, src_length, None, trg, None, torch.arange(len(examples)), device, JOEY_PAD, JOEY_EOS)


def train_step(model, batch, optimizer, clip_grad_norm: float) -> int:
    """JoeyNMT's TrainManager._train_step + its optimizer update; returns target tokens."""
    model.train()
    batch.sort_by_src_length()
    loss, _, _, _ = model(return_type="loss", **vars(batch))
    (loss / batch.ntokens).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip_grad_norm)
    optimizer.step()
    optimizer.zero_grad()
    return batch.ntokens


@torch.no_grad()
def decode(model, batch, beam_size: int, alpha: float = 1.0):
    """JoeyNMT's search(): greedy when beam_size < 2; output limit 1.5 x longest source."""
    from joeynmt.search import search

    model.eval()
    batch.sort_by_src_length()
    return search(model, batch, max_output_length=-1, beam_size=beam_size, beam_alpha=alpha, n_best=1)
