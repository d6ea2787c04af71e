"""The Transformer (Vaswani et al., 2017): attention only, the chapter after Bahdanau and Luong.

Where the RNN's decoder waits for step t-1 before step t, every layer here reads all positions
at once in training, through scaled dot-product attention with ``model.heads`` heads::

    Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V,   head_i = Attention(x W_i^Q, m W_i^K, m W_i^V)

Each encoder layer is self-attention then a feed-forward network; each decoder layer is causal
self-attention, attention over the encoder's outputs (cross-attention, the RNN's attention's
successor), then the feed-forward network. The layers are **pre-norm** — x + sublayer(LN(x)),
with a last LN on top of each stack — which trains without the post-norm's fragile warm-up on
small corpora (Nguyen & Salazar, 2019; Araabi & Monz, 2020). ``model.dropout`` falls on the
embeddings and every residual branch, ``model.attention_dropout`` on the attention weights,
``model.activation_dropout`` inside the feed-forward network.

Attention runs through ``torch.nn.functional.scaled_dot_product_attention`` (fused kernels) where
nobody reads the weights, and through the plain softmax above where someone does: search's
attention rows (heatmaps, coverage), the teacher-forced pass in eval mode. Both paths compute the
same function (tests/test_transformer.py). The weights a Transformer shows are its **last decoder
layer's cross-attention, heads averaged** (``shown_weights``).

Search (``nmt.decoding.search``) calls ``encode`` once and ``decode_step`` per token: each step
runs one position through the decoder, its self-attention reading the keys and values of the
steps before from a cache (``TransformerState``), its cross-attention the encoder's keys and
values projected once per sentence (``TransformerMemory``); both ``select`` rows as beams move.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn

from nmt.config.schema import Config, ModelConfig
from nmt.core.errors import NmtError
from nmt.core.registry import ARCHITECTURES
from nmt.data.tokenizer import PAD_ID
from nmt.model.base import SHARED_KEYS, OnnxGraphs, TranslationModel
from nmt.model.dropout import Dropout
from nmt.model.fast import compiled_for_training
from nmt.model.graphs import per_layer

# model.positions: learned: one row per position up to this many; later positions share the last row
MAX_LEARNED_POSITIONS = 1024


class MultiHeadAttention(nn.Module):
    """``heads`` scaled dot-product attentions side by side, each over width / heads dimensions."""

    def __init__(self, width: int, heads: int, dropout: float):
        super().__init__()
        self.heads, self.head_dim = heads, width // heads
        self.query = nn.Linear(width, width)  # W^Q of every head, side by side
        # [W^K; W^V]: one product for both. The keys take no bias: it would add q · b to every
        # score of a row alike, which softmax ignores, so its gradient is only rounding noise
        # (that Adam would scale up into full-size steps); the values' bias is b_V.
        self.key_value = nn.Linear(width, 2 * width, bias=False)
        self.value_bias = nn.Parameter(torch.zeros(width))
        self.out = nn.Linear(width, width)  # W^O
        self.dropout = dropout  # on the attention weights, in training

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, heads · d) -> (B, heads, T, d)."""
        return x.unflatten(-1, (self.heads, self.head_dim)).transpose(1, 2)

    def keys_values(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x (B, S, width) -> keys and values, each (B, heads, S, d)."""
        keys, values = self.key_value(x).chunk(2, dim=-1)
        return self.split_heads(keys), self.split_heads(values + self.value_bias)

    def forward(
        self,
        x: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        key_mask: torch.Tensor | None = None,
        causal: bool = False,
        with_weights: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Queries from x (B, T, width) over keys and values (B, heads, S, d); key_mask (B, S)
        True at the positions that may be attended to; ``causal``: position t sees keys ≤ t.
        -> output (B, T, width), and the weights (B, heads, T, S) when ``with_weights``."""
        queries = self.split_heads(self.query(x))  # (B, heads, T, d)
        dropout = self.dropout if self.training else 0.0
        mask = None if key_mask is None else key_mask[:, None, None, :]  # (B, 1, 1, S): broadcast over heads, T
        weights = None
        if with_weights:
            context, weights = attend_explicitly(queries, keys, values, mask, causal, dropout)
        else:
            context = F.scaled_dot_product_attention(queries, keys, values, mask, dropout, is_causal=causal)
        return self.out(context.transpose(1, 2).flatten(2)), weights  # heads side by side again: (B, T, width)

    def explain(
        self,
        x: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        key_mask: torch.Tensor | None = None,
        causal: bool = False,
        with_weights: bool = False,
    ) -> dict[str, torch.Tensor]:
        """What a call with these inputs computes, each part of it (the lab's playback, after a
        forward hook kept the call's inputs): ``queries`` (B, heads, T, d), ``keys`` and
        ``values`` (B, heads, S, d), ``scores`` q·k/√d (B, heads, T, S) with −inf where masked,
        ``weights`` their softmax, ``contexts`` Σ_j α_j v_j per head (B, heads, T, d), and
        ``output`` (B, T, width), the call's own."""
        queries = self.split_heads(self.query(x))
        scores = queries @ keys.transpose(-1, -2) / math.sqrt(queries.size(-1))
        if key_mask is not None:
            scores = scores.masked_fill(~key_mask[:, None, None, :], float("-inf"))
        if causal:
            future = torch.ones(scores.shape[-2:], dtype=torch.bool, device=scores.device).triu(1)
            scores = scores.masked_fill(future, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        contexts = weights @ values
        output = self.out(contexts.transpose(1, 2).flatten(2))
        parts = {"queries": queries, "keys": keys, "values": values, "scores": scores, "weights": weights}
        return parts | {"contexts": contexts, "output": output}


def attend_explicitly(
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor | None,
    causal: bool,
    dropout: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(Q Kᵀ / √d) V written out: queries (B, H, T, d), keys/values (B, H, S, d), mask
    broadcastable to (B, H, T, S) -> context (B, H, T, d), weights (B, H, T, S). The function
    scaled_dot_product_attention computes, with the weights kept (before dropout)."""
    scores = queries @ keys.transpose(-1, -2) / math.sqrt(queries.size(-1))  # (B, H, T, S)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    if causal:
        future = torch.ones(scores.shape[-2:], dtype=torch.bool, device=scores.device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    dropped = F.dropout(weights, dropout) if dropout > 0 else weights
    return dropped @ values, weights


class FeedForward(nn.Module):
    """FFN(x) = W_2 dropout(ReLU(W_1 x + b_1)) + b_2, ``model.ff_dim`` wide inside."""

    def __init__(self, width: int, inner: int, activation_dropout: float):
        super().__init__()
        self.inner = nn.Linear(width, inner)
        self.outer = nn.Linear(inner, width)
        self.dropout = Dropout(activation_dropout, lanes=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.outer(self.dropout(F.relu(self.inner(x))))


class EncoderLayer(nn.Module):
    """x + SelfAttention(LN(x)), then x + FFN(LN(x))."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        width = config.embed_dim
        self.self_norm = nn.LayerNorm(width)
        self.self_attention = MultiHeadAttention(width, config.heads, config.attention_dropout)
        self.ff_norm = nn.LayerNorm(width)
        self.feed_forward = FeedForward(width, config.ff_dim, config.activation_dropout)
        self.dropout = Dropout(config.dropout, lanes=True)

    def forward(self, x: torch.Tensor, key_mask: torch.Tensor) -> torch.Tensor:
        """x (B, S, width), key_mask (B, S) -> (B, S, width)."""
        normed = self.self_norm(x)
        attended, _ = self.self_attention(normed, *self.self_attention.keys_values(normed), key_mask)
        x = x + self.dropout(attended)
        return x + self.dropout(self.feed_forward(self.ff_norm(x)))


class DecoderLayer(nn.Module):
    """x + CausalSelfAttention(LN(x)), x + CrossAttention(LN(x), encoder), then x + FFN(LN(x))."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        width = config.embed_dim
        self.self_norm = nn.LayerNorm(width)
        self.self_attention = MultiHeadAttention(width, config.heads, config.attention_dropout)
        self.cross_norm = nn.LayerNorm(width)
        self.cross_attention = MultiHeadAttention(width, config.heads, config.attention_dropout)
        self.ff_norm = nn.LayerNorm(width)
        self.feed_forward = FeedForward(width, config.ff_dim, config.activation_dropout)
        self.dropout = Dropout(config.dropout, lanes=True)

    def forward(
        self,
        x: torch.Tensor,
        memory: TransformerMemory,
        index: int,
        cache: tuple[torch.Tensor, torch.Tensor] | None = None,
        with_weights: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None, tuple[torch.Tensor, torch.Tensor]]:
        """x (B, T, width) -> (B, T, width), the cross-attention's weights (B, heads, T, S) when
        ``with_weights``, and the self-attention's keys and values (B, heads, T', d). Without a
        ``cache`` (training) they are the T positions' own, causally masked; with one (search,
        T = 1) the cached positions' and this one's, T' = t + 1. ``index``: the layer's place,
        whose cross-attention keys and values ``memory`` holds."""
        normed = self.self_norm(x)
        keys, values = self.self_attention.keys_values(normed)
        if cache is not None:
            keys, values = torch.cat([cache[0], keys], dim=2), torch.cat([cache[1], values], dim=2)
        attended, _ = self.self_attention(normed, keys, values, causal=cache is None)
        x = x + self.dropout(attended)
        attended, weights = self.cross_attention(
            self.cross_norm(x), memory.keys[index], memory.values[index], memory.mask, with_weights=with_weights
        )
        x = x + self.dropout(attended)
        return x + self.dropout(self.feed_forward(self.ff_norm(x))), weights, (keys, values)


class Positions(nn.Module):
    """The encoding of each position, added to the scaled embeddings: sinusoidal (Vaswani et al.,
    3.5), a function of any length, or learned, a table of ``MAX_LEARNED_POSITIONS`` rows."""

    frequencies: torch.Tensor

    def __init__(self, config: ModelConfig):
        super().__init__()
        width = config.embed_dim
        self.learned = nn.Embedding(MAX_LEARNED_POSITIONS, width) if config.positions == "learned" else None
        # sinusoid frequencies 1 / 10000^(2i / width), one per pair of dimensions (not saved: a function)
        frequencies = torch.exp(torch.arange(0, width, 2, dtype=torch.float32) * (-math.log(10000.0) / width))
        self.register_buffer("frequencies", frequencies, persistent=False)
        self.width = width

    def forward(self, start: int | torch.Tensor, length: int, device: torch.device) -> torch.Tensor:
        """The encodings of positions start .. start + length - 1: (length, width)."""
        index = torch.arange(length, device=device) + start  # (length,)
        if self.learned is not None:
            return self.learned(index.clamp(max=MAX_LEARNED_POSITIONS - 1))
        angles = index.float()[:, None] * self.frequencies[None, :]  # (length, width / 2)
        # sin at even dimensions, cos at odd ones
        return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(-2)[:, : self.width]


class Embedder(nn.Module):
    """√width · E x + the position's encoding, then dropout. ``embedding`` holds E: the name the
    RNN's encoder and decoder give their tables, which transfer and joint vocabularies read."""

    def __init__(self, config: ModelConfig, vocab_size: int):
        super().__init__()
        width = config.embed_dim
        self.embedding = nn.Embedding(vocab_size, width, padding_idx=PAD_ID)
        # N(0, 1/width), as √width scales it back to unit size (fairseq's initialisation)
        nn.init.normal_(self.embedding.weight, std=width**-0.5)
        with torch.no_grad():
            self.embedding.weight[PAD_ID].zero_()
        self.scale = math.sqrt(width)
        self.positions = Positions(config)
        self.embed_dropout = Dropout(config.dropout, lanes=True)

    def embed(self, tokens: torch.Tensor, start: int | torch.Tensor = 0) -> torch.Tensor:
        """tokens (B, T) at positions start.. -> (B, T, width)."""
        embedded = self.embedding(tokens) * self.scale + self.positions(start, tokens.size(1), tokens.device)
        return self.embed_dropout(embedded)


class TransformerEncoder(Embedder):
    def __init__(self, config: ModelConfig, vocab_size: int):
        super().__init__(config, vocab_size)
        self.layers = nn.ModuleList(EncoderLayer(config) for _ in range(config.encoder_layers))
        self.norm = nn.LayerNorm(config.embed_dim)

    def forward(self, src: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """src (B, S), mask (B, S) True at real tokens -> the encoder's outputs (B, S, width)."""
        x = self.embed(src)  # (B, S, width)
        for layer in self.layers:
            x = layer(x, mask)
        return self.norm(x)


@dataclass
class TransformerMemory:
    """What the decoder reads from the encoder, fixed for the sentence: each layer's
    cross-attention keys and values, projected once."""

    keys: list[torch.Tensor]  # per decoder layer, (B, heads, S, d)
    values: list[torch.Tensor]
    mask: torch.Tensor  # (B, S) bool, True at real source positions

    def select(self, index: torch.Tensor) -> TransformerMemory:
        return TransformerMemory(
            [k.index_select(0, index) for k in self.keys],
            [v.index_select(0, index) for v in self.values],
            self.mask.index_select(0, index),
        )


@dataclass
class TransformerState:
    """The decoder's self-attention cache: each layer's keys and values of the target
    positions decoded so far, and the next position."""

    keys: list[torch.Tensor]  # per decoder layer, (B, heads, t, d)
    values: list[torch.Tensor]
    position: int = 0

    def select(self, index: torch.Tensor) -> TransformerState:
        return TransformerState(
            [k.index_select(0, index) for k in self.keys],
            [v.index_select(0, index) for v in self.values],
            self.position,
        )


class TransformerDecoder(Embedder):
    def __init__(self, config: ModelConfig, vocab_size: int):
        super().__init__(config, vocab_size)
        self.vocab_size = vocab_size
        self.layers = nn.ModuleList(DecoderLayer(config) for _ in range(config.decoder_layers))
        self.norm = nn.LayerNorm(config.embed_dim)
        self.output = nn.Linear(config.embed_dim, vocab_size)
        if config.tie_embeddings:  # Press & Wolf (2017): the output layer is the target embedding table
            self.output.weight = self.embedding.weight
        self.heads, self.head_dim = config.heads, config.embed_dim // config.heads

    def share_embedding(self, embedding: nn.Embedding) -> None:
        """The encoder's table (one joint vocabulary), for the output layer too when it is tied."""
        tied = self.output.weight is self.embedding.weight
        self.embedding = embedding
        if tied:
            self.output.weight = embedding.weight

    def memory(self, enc_outputs: torch.Tensor, mask: torch.Tensor) -> TransformerMemory:
        layers = cast(list[DecoderLayer], list(self.layers))
        pairs = [layer.cross_attention.keys_values(enc_outputs) for layer in layers]  # each (B, heads, S, d)
        return TransformerMemory([k for k, _ in pairs], [v for _, v in pairs], mask)

    def initial_state(self, memory: TransformerMemory) -> TransformerState:
        """An empty cache: keys and values (B, heads, 0, d) per layer."""
        empty = memory.keys[0].new_zeros(memory.mask.size(0), self.heads, 0, self.head_dim)
        return TransformerState([empty] * len(self.layers), [empty] * len(self.layers))

    def forward(
        self, tgt_in: torch.Tensor, memory: TransformerMemory, weights_of: int | None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Teacher-forced: tgt_in (B, T) -> logits (B, T, V) and the cross-attention weights of
        layer ``weights_of`` (B, heads, T, S; None: no layer's, the fused kernels' pass)."""
        x = self.embed(tgt_in)  # (B, T, width)
        weights = None
        shown = None if weights_of is None else range(len(self.layers))[weights_of]
        for index, layer in enumerate(self.layers):
            x, layer_weights, _ = layer(x, memory, index, with_weights=index == shown)
            weights = layer_weights if index == shown else weights
        return self.output(self.norm(x)), weights

    def cross_weights(self, tgt_in: torch.Tensor, memory: TransformerMemory) -> list[torch.Tensor]:
        """Teacher-forced: every layer's cross-attention weights, each (B, heads, T, S)."""
        x = self.embed(tgt_in)  # (B, T, width)
        weights = []
        for index, layer in enumerate(self.layers):
            x, layer_weights, _ = layer(x, memory, index, with_weights=True)
            weights.append(layer_weights)
        return weights

    def step(
        self, prev_tokens: torch.Tensor, state: TransformerState, memory: TransformerMemory, every_layer: bool = False
    ) -> tuple[torch.Tensor, TransformerState, list[torch.Tensor]]:
        """One position: prev_tokens (B,) -> logits (B, V), the cache one position longer, and the
        cross-attention weights (B, heads, S) of the last layer, or of every layer (``every_layer``:
        the offline page draws each head)."""
        x = self.embed(prev_tokens[:, None], state.position)  # (B, 1, width)
        keys, values, weights = [], [], []
        for index, layer in enumerate(self.layers):
            shown = every_layer or index == len(self.layers) - 1
            cache = (state.keys[index], state.values[index])
            x, layer_weights, (layer_keys, layer_values) = layer(x, memory, index, cache, with_weights=shown)
            keys.append(layer_keys)
            values.append(layer_values)
            if layer_weights is not None:
                weights.append(layer_weights[:, :, 0])  # (B, heads, S)
        logits = self.output(self.norm(x))[:, 0]
        return logits, TransformerState(keys, values, state.position + 1), weights


# nmt tune's default space for the Transformer: the small-data levers of Araabi & Monz (2020) and
# van Biljon et al. (2020) — depth, width, heads, dropout, vocabulary — and the warm-up it needs.
TRANSFORMER_SPACE: dict[str, dict] = {
    "model.width": {"choices": [128, 256, 384]},
    "model.encoder_layers": {"choices": [2, 3, 4, 6]},
    "model.decoder_layers": {"choices": [2, 3, 4, 6]},
    "model.heads": {"choices": [2, 4, 8]},
    "model.ff_dim": {"choices": [512, 1024, 2048]},
    "model.dropout": {"low": 0.1, "high": 0.5},
    "model.attention_dropout": {"low": 0.0, "high": 0.3},
    "tokenizer.src_vocab_size": {"choices": [1000, 2000, 4000]},
    "tokenizer.tgt_vocab_size": {"choices": [1000, 2000, 4000]},
    "train.learning_rate": {"low": 0.0003, "high": 0.003, "log": True},
    "train.lr_warmup": {"choices": [200, 500, 1000, 2000]},
    "train.label_smoothing": {"low": 0.0, "high": 0.3},
    "train.batch_size": {"choices": [32, 64, 128]},
}


@ARCHITECTURES.register("transformer")
class Transformer(TranslationModel):
    """Encoder and decoder of ``model.encoder_layers`` and ``model.decoder_layers`` pre-norm
    layers, ``model.embed_dim`` wide, through the same protocols as the RNN (``Seq2Seq``):
    ``forward`` for training, ``encode`` / ``decode_step`` for search."""

    config_keys = SHARED_KEYS + ("heads", "ff_dim", "attention_dropout", "activation_dropout", "positions")
    title = "Transformer translation model"
    has_heads = True
    whole_target = True
    aligning_layer = -2  # the penultimate (Garg et al. 2019; a 1-layer decoder: its only layer)
    guided_head = 0  # Garg et al. supervise one head of that layer: the first

    @classmethod
    def served_settings(cls, config: ModelConfig) -> dict:
        return {**super().served_settings(config), "heads": config.heads}

    @classmethod
    def head_grid(cls, config: ModelConfig) -> tuple[int, int] | None:
        return config.decoder_layers, config.heads

    @classmethod
    def describe(cls, m: ModelConfig) -> str:
        return (
            f"pre-norm Transformer, {m.encoder_layers} encoder and {m.decoder_layers} decoder layer(s), width "
            f"{m.embed_dim}, {m.heads} heads, feed-forward {m.ff_dim}, {m.positions} positions"
        )

    @classmethod
    def check_training(cls, config: Config) -> None:
        train = config.train
        if train.teacher_forcing < 1.0:
            raise NmtError(
                "Config key 'train.teacher_forcing': a Transformer trains all target positions at once, from the "
                "gold tokens; scheduled sampling (teacher_forcing < 1) is the RNN's. Leave it at 1."
            )
        others = sorted(set(train.freeze) - set(cls.freezable))
        if others:
            raise NmtError(
                f"Config key 'train.freeze': {', '.join(others)} are parts of the RNN; a Transformer's are "
                f"{', '.join(cls.freezable[:-1])} and {cls.freezable[-1]}."
            )

    @classmethod
    def summary(cls, config: ModelConfig) -> str:
        return f"Transformer {config.encoder_layers}+{config.decoder_layers} layers, {config.heads} heads"

    @classmethod
    def check_model(cls, model: ModelConfig) -> None:
        if model.embed_dim % model.heads:
            raise NmtError(
                f"model.heads={model.heads} splits model.embed_dim ({model.embed_dim}) among the heads: "
                f"embed_dim must divide by it (e.g. heads: {max(h for h in (1, 2, 4, 8) if model.embed_dim % h == 0)})."
            )

    def training_notes(self, config: Config, device: torch.device) -> list[str]:
        if config.train.lr_warmup:
            return []
        return [
            "A Transformer with no train.lr_warmup: its first full-size steps can derail attention; "
            "configs/eng-mar-transformer.yaml warms up over its first steps."
        ]

    @classmethod
    def tune_space(cls) -> dict[str, dict]:
        return dict(TRANSFORMER_SPACE)

    @classmethod
    def playback_numbers(cls, model: ModelConfig, source: int, target: int, top_k: int) -> int:
        width = model.embed_dim // max(1, model.heads)
        return target * (2 * width + 2 * source + 2 * top_k) + source * width

    @classmethod
    def onnx_graphs(cls) -> OnnxGraphs:
        return TRANSFORMER_GRAPHS

    def __init__(self, config: ModelConfig, src_vocab_size: int, tgt_vocab_size: int, joint_vocabulary: bool = False):
        super().__init__()
        self.config = config
        self.tgt_vocab_size = tgt_vocab_size
        self.encoder = TransformerEncoder(config, src_vocab_size)
        self.decoder = TransformerDecoder(config, tgt_vocab_size)
        if joint_vocabulary and src_vocab_size == tgt_vocab_size:  # tokenizer.joint: one table for both sides
            self.decoder.share_embedding(self.encoder.embedding)

    def encode(self, src: torch.Tensor, src_lengths: torch.Tensor) -> tuple[TransformerMemory, TransformerState]:
        """src (B, S) -> the decoder's memory and an empty cache (the lengths are in the padding)."""
        mask = src.ne(PAD_ID)  # (B, S): the real tokens, <eos> included
        memory = self.decoder.memory(self.encoder(src, mask), mask)
        return memory, self.decoder.initial_state(memory)

    def decode_step(
        self, prev_tokens: torch.Tensor, state: TransformerState, memory: TransformerMemory
    ) -> tuple[torch.Tensor, TransformerState, torch.Tensor]:
        """prev_tokens (B,) -> logits (B, V) float32, the longer cache, the shown attention (B, S):
        the last layer's heads averaged."""
        logits, state, weights = self.decoder.step(prev_tokens, state, memory)
        return logits.float(), state, weights[-1].mean(1).float()

    def cross_attention(
        self,
        src: torch.Tensor,
        src_lengths: torch.Tensor,
        tgt_in: torch.Tensor,
        layer: int | None = None,
        heads: list[int] | None = None,
    ) -> torch.Tensor:
        """Decoder ``layer``'s cross-attention (default ``aligning_layer``; negative counts from the
        last), ``heads`` averaged (default: every head): (B, T, S)."""
        layers, count = self.config.decoder_layers, self.config.heads
        if layer is None:
            layer = self.default_layer()
        if not -layers <= layer < layers:
            raise NmtError(f"layer must be from {-layers} to {layers - 1} (this decoder has {layers}), got {layer}.")
        picked = list(range(count)) if heads is None else heads
        if not picked or any(not 0 <= h < count for h in picked):
            raise NmtError(f"heads must be from 0 to {count - 1} (this model has {count}), got {heads}.")
        memory, _ = self.encode(src, src_lengths)
        weights = self.decoder.cross_weights(tgt_in, memory)[layer]  # (B, heads, T, S)
        return weights[:, picked].mean(1).float()

    @torch.no_grad()
    def every_head(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """The cross-attention of every head of every decoder layer along one translation: src
        (1, S), tgt_in (1, T) <bos> and the tokens -> (layers, heads, T, S), step by step with the
        cache as search decodes (the training timeline records it per epoch)."""
        memory, state = self.encode(src, torch.tensor([src.size(1)]))
        steps = []
        for t in range(tgt_in.size(1)):
            _, state, weights = self.decoder.step(tgt_in[:, t], state, memory, every_layer=True)
            steps.append(torch.stack(weights)[:, 0])  # (layers, heads, S)
        return torch.stack(steps, dim=2).float()  # (layers, heads, T, S)

    def forward(
        self, src: torch.Tensor, src_lengths: torch.Tensor, tgt_in: torch.Tensor, teacher_forcing: float = 1.0
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Teacher-forced pass: logits (B, T, V), and the shown attention (B, T, S) in eval mode
        (in training nobody reads it, and the fused kernels do not make it). All target positions
        at once: ``teacher_forcing`` < 1 (scheduled sampling) is refused by the config."""
        mask = src.ne(PAD_ID)  # (B, S)
        memory = self.decoder.memory(self.encoder(src, mask), mask)
        logits, weights = self.decoder(tgt_in, memory, weights_of=None if self.training else -1)
        return logits, None if weights is None else weights.mean(1)

    def guided_forward(
        self, src: torch.Tensor, src_lengths: torch.Tensor, tgt_in: torch.Tensor, teacher_forcing: float = 1.0
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Garg et al. (2019): one head of the aligning layer (``guided_head``) is the one guided; the
        others attend as they will. -> logits (B, T, V), that head's weights (B, T, S)."""
        mask = src.ne(PAD_ID)  # (B, S)
        memory = self.decoder.memory(self.encoder(src, mask), mask)
        logits, weights = self.decoder(tgt_in, memory, weights_of=self.default_layer())
        assert weights is not None
        return logits, weights[:, self.guided_head]

    def default_layer(self) -> int:
        """``aligning_layer``, or a one-layer decoder's only layer."""
        layers = self.config.decoder_layers
        return self.aligning_layer if -layers <= self.aligning_layer < layers else 0

    def ctranslate2_spec(self, src_pieces: list[str], tgt_pieces: list[str]) -> Any:
        from nmt.model.ctranslate2_spec import transformer_spec

        return transformer_spec(self, src_pieces, tgt_pieces)

    def compile_steps(self, mode: str, backend: str = "inductor") -> None:
        """``train.compile``: compile each layer (shapes dynamic: no recompilation per length);
        under ``reduce-overhead``, search runs the layers eagerly (``compiled_for_training``)."""
        for layer in [*self.encoder.layers, *self.decoder.layers]:
            layer.forward = compiled_for_training(layer.forward, mode, backend)


# ---- the Transformer as two ONNX graphs of flat, named tensors (nmt/model/graphs.py's layout) ----


def _interleaved(keys: list[torch.Tensor], values: list[torch.Tensor]) -> list[torch.Tensor]:
    """k_0, v_0, k_1, v_1, … (``per_layer``'s order)."""
    return [tensor for pair in zip(keys, values) for tensor in pair]


class TransformerEncoderGraph(nn.Module):
    """``Transformer.encode`` with flat outputs: the memory, then the empty caches."""

    def __init__(self, model: Transformer):
        super().__init__()
        self.model = model

    def forward(self, src: torch.Tensor) -> tuple[torch.Tensor, ...]:
        memory, state = self.model.encode(src, src.ne(PAD_ID).sum(1))
        return (memory.mask, *_interleaved(memory.keys, memory.values), *_interleaved(state.keys, state.values))


class TransformerStepGraph(nn.Module):
    """``Transformer.decode_step`` with flat inputs and outputs, every layer's heads last."""

    def __init__(self, model: Transformer):
        super().__init__()
        self.model = model

    def forward(self, prev_tokens, step, mask, *tensors) -> tuple[torch.Tensor, ...]:
        """tensors: each layer's cross-attention keys and values, then each layer's cache."""
        layers = self.model.config.decoder_layers
        cross, cache = tensors[: 2 * layers], tensors[2 * layers :]
        memory = TransformerMemory(list(cross[0::2]), list(cross[1::2]), mask)
        state = TransformerState(list(cache[0::2]), list(cache[1::2]), step)
        logits, state, weights = self.model.decoder.step(prev_tokens, state, memory, every_layer=True)
        heads = torch.stack(weights, 1)  # (B, layers, heads, S)
        return (logits.float(), heads[:, -1].mean(1), *_interleaved(state.keys, state.values), heads)


def transformer_axes(names: list[str]) -> dict[str, dict[int, str]]:
    """A Transformer's dynamic axes, by name: the batch first; the source's length in the mask,
    the cross-attention's keys and values, the attention and the heads; the cache's length, and
    the next cache's (one longer), in the self-attention's."""
    axes: dict[str, dict[int, str]] = {}
    for name in names:
        if name == "step":
            continue
        axes[name] = {0: "batch"}
        if name in ("src", "mask", "attention"):
            axes[name][1] = "source"
        elif name.startswith("cross_"):
            axes[name][2] = "source"
        elif name == "heads":
            axes[name][3] = "source"
        elif name.startswith("self_"):
            axes[name][2] = "steps"
        elif name.startswith("next_self_"):
            axes[name][2] = "steps_after"
    return axes


def _transformer_modules(model: TranslationModel) -> tuple[nn.Module, nn.Module]:
    transformer = cast(Transformer, model)
    return TransformerEncoderGraph(transformer), TransformerStepGraph(transformer)


TRANSFORMER_GRAPHS = OnnxGraphs(
    lambda config: ["mask", *per_layer("cross", config.decoder_layers)],  # the mask, each layer's keys and values
    lambda config: per_layer("self", config.decoder_layers),  # each layer's cache
    _transformer_modules,
    steps_before_tracing=2,
    extra_outputs=("heads",),
    axes=transformer_axes,
)
