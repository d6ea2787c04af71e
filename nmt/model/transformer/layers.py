"""The Transformer's network (Vaswani et al., 2017): attention only, the chapter after Bahdanau and Luong.

Where the RNN's decoder waits for step t-1 before step t, every layer here reads all positions
at once in training, through scaled dot-product attention with ``model.heads`` heads::

    Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V,   head_i = Attention(x W_i^Q, m W_i^K, m W_i^V)

Each encoder layer is self-attention then a feed-forward network; each decoder layer is causal
self-attention, attention over the encoder's outputs (cross-attention, the RNN's attention's
successor), then the feed-forward network. The layers are **pre-norm** by default — x +
sublayer(LN(x)), with a last LN on top of each stack — which trains without the post-norm's
fragile warm-up on small corpora (Nguyen & Salazar, 2019; Araabi & Monz, 2020); ``model.norm:
post`` gives the 2017 paper's LN(x + sublayer(x)), Marian's. ``model.dropout`` falls on the
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
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn

from nmt.data.tokenizer import PAD_ID
from nmt.model.dropout import Dropout
from nmt.model.transformer.settings import TransformerConfig

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


# model.activation
ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {"relu": F.relu, "swish": F.silu, "gelu": F.gelu}


class FeedForward(nn.Module):
    """FFN(x) = W_2 dropout(act(W_1 x + b_1)) + b_2, ``model.ff_dim`` wide inside; act is
    ``model.activation`` (ReLU, swish = x·σ(x), or GELU)."""

    def __init__(self, width: int, inner: int, activation_dropout: float, activation: str = "relu"):
        super().__init__()
        self.inner = nn.Linear(width, inner)
        self.outer = nn.Linear(inner, width)
        self.dropout = Dropout(activation_dropout, lanes=True)
        self.activation = ACTIVATIONS[activation]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.outer(self.dropout(self.activation(self.inner(x))))


def block_input(norm: nn.LayerNorm, x: torch.Tensor, post: bool) -> torch.Tensor:
    """What a block reads (``model.norm``): LN(x) pre-norm, x itself post-norm."""
    return x if post else norm(x)


def residual(norm: nn.LayerNorm, x: torch.Tensor, output: torch.Tensor, dropout: Dropout, post: bool) -> torch.Tensor:
    """A block's output added back: x + dropout(output) pre-norm, LN(x + dropout(output)) post-norm."""
    summed = x + dropout(output)
    return norm(summed) if post else summed


class EncoderLayer(nn.Module):
    """x + SelfAttention(LN(x)), then x + FFN(LN(x)); post-norm: LN(x + SelfAttention(x)), then
    LN(x + FFN(x))."""

    def __init__(self, config: TransformerConfig):
        super().__init__()
        width = config.embed_dim
        self.post = config.norm == "post"
        self.self_norm = nn.LayerNorm(width)
        self.self_attention = MultiHeadAttention(width, config.heads, config.attention_dropout)
        self.ff_norm = nn.LayerNorm(width)
        self.feed_forward = FeedForward(width, config.ff_dim, config.activation_dropout, config.activation)
        self.dropout = Dropout(config.dropout, lanes=True)

    def forward(self, x: torch.Tensor, key_mask: torch.Tensor) -> torch.Tensor:
        """x (B, S, width), key_mask (B, S) -> (B, S, width)."""
        normed = block_input(self.self_norm, x, self.post)
        attended, _ = self.self_attention(normed, *self.self_attention.keys_values(normed), key_mask)
        x = residual(self.self_norm, x, attended, self.dropout, self.post)
        fed = self.feed_forward(block_input(self.ff_norm, x, self.post))
        return residual(self.ff_norm, x, fed, self.dropout, self.post)


class DecoderLayer(nn.Module):
    """x + CausalSelfAttention(LN(x)), x + CrossAttention(LN(x), encoder), then x + FFN(LN(x));
    post-norm, each LN(x + Block(x)) as in the encoder."""

    def __init__(self, config: TransformerConfig):
        super().__init__()
        width = config.embed_dim
        self.post = config.norm == "post"
        self.self_norm = nn.LayerNorm(width)
        self.self_attention = MultiHeadAttention(width, config.heads, config.attention_dropout)
        self.cross_norm = nn.LayerNorm(width)
        self.cross_attention = MultiHeadAttention(width, config.heads, config.attention_dropout)
        self.ff_norm = nn.LayerNorm(width)
        self.feed_forward = FeedForward(width, config.ff_dim, config.activation_dropout, config.activation)
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
        normed = block_input(self.self_norm, x, self.post)
        keys, values = self.self_attention.keys_values(normed)
        if cache is not None:
            keys, values = torch.cat([cache[0], keys], dim=2), torch.cat([cache[1], values], dim=2)
        attended, _ = self.self_attention(normed, keys, values, causal=cache is None)
        x = residual(self.self_norm, x, attended, self.dropout, self.post)
        attended, weights = self.cross_attention(
            block_input(self.cross_norm, x, self.post),
            memory.keys[index],
            memory.values[index],
            memory.mask,
            with_weights=with_weights,
        )
        x = residual(self.cross_norm, x, attended, self.dropout, self.post)
        fed = self.feed_forward(block_input(self.ff_norm, x, self.post))
        return residual(self.ff_norm, x, fed, self.dropout, self.post), weights, (keys, values)


class Positions(nn.Module):
    """The encoding of each position, added to the embeddings (``model.positions``): a function of
    any length — sinusoidal (Vaswani et al., 3.5: sin and cos of each frequency side by side),
    marian (all the sines, then all the cosines) or fairseq (sines then cosines, the frequencies
    spaced over half_width − 1 steps, positions counted from 2) — or learned, a table of
    ``MAX_LEARNED_POSITIONS`` rows."""

    frequencies: torch.Tensor

    def __init__(self, config: TransformerConfig):
        super().__init__()
        width = config.embed_dim
        self.layout = config.positions
        self.learned = nn.Embedding(MAX_LEARNED_POSITIONS, width) if config.positions == "learned" else None
        half = width // 2
        if config.positions == "fairseq":  # 1 / 10000^(i / (half - 1)), i < half
            frequencies = torch.exp(torch.arange(half, dtype=torch.float32) * -(math.log(10000.0) / max(1, half - 1)))
        else:  # 1 / 10000^(2i / width), one per pair of dimensions
            frequencies = torch.exp(torch.arange(0, width, 2, dtype=torch.float32) * (-math.log(10000.0) / width))
        self.register_buffer("frequencies", frequencies, persistent=False)  # not saved: a function
        self.width = width
        # fairseq counts a sentence's positions from padding_idx + 1 = 2 (M2M100, NLLB)
        self.first = 2 if config.positions == "fairseq" else 0

    def forward(self, start: int | torch.Tensor, length: int, device: torch.device) -> torch.Tensor:
        """The encodings of positions start .. start + length - 1: (length, width)."""
        index = torch.arange(length, device=device) + start  # (length,)
        if self.learned is not None:
            return self.learned(index.clamp(max=MAX_LEARNED_POSITIONS - 1))
        angles = (index + self.first).float()[:, None] * self.frequencies[None, :]  # (length, width / 2)
        if self.layout == "sinusoidal":  # sin at even dimensions, cos at odd ones
            return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(-2)[:, : self.width]
        encodings = torch.cat([angles.sin(), angles.cos()], dim=-1)  # (length, 2 · (width / 2))
        return F.pad(encodings, (0, self.width - encodings.size(-1)))  # an odd width: a last zero column


class Embedder(nn.Module):
    """√width · E x (``model.scale_embeddings``; E x without) + the position's encoding, then
    dropout. ``embedding`` holds E: the name the RNN's encoder and decoder give their tables,
    which transfer and joint vocabularies read."""

    def __init__(self, config: TransformerConfig, vocab_size: int):
        super().__init__()
        width = config.embed_dim
        self.embedding = nn.Embedding(vocab_size, width, padding_idx=PAD_ID)
        # N(0, 1/width), as √width scales it back to unit size (fairseq's initialisation)
        nn.init.normal_(self.embedding.weight, std=width**-0.5)
        with torch.no_grad():
            self.embedding.weight[PAD_ID].zero_()
        self.scale = math.sqrt(width) if config.scale_embeddings else 1.0
        self.positions = Positions(config)
        self.embed_dropout = Dropout(config.dropout, lanes=True)

    def embed(self, tokens: torch.Tensor, start: int | torch.Tensor = 0) -> torch.Tensor:
        """tokens (B, T) at positions start.. -> (B, T, width)."""
        embedded = self.embedding(tokens) * self.scale + self.positions(start, tokens.size(1), tokens.device)
        return self.embed_dropout(embedded)


def stack_norm(config: TransformerConfig) -> nn.Module:
    """The last layer norm of a stack: pre-norm's (its layers leave their sums unnormalised);
    none post-norm (each layer ends in one)."""
    return nn.LayerNorm(config.embed_dim) if config.norm == "pre" else nn.Identity()


class TransformerEncoder(Embedder):
    def __init__(self, config: TransformerConfig, vocab_size: int):
        super().__init__(config, vocab_size)
        self.layers = nn.ModuleList(EncoderLayer(config) for _ in range(config.encoder_layers))
        self.norm = stack_norm(config)

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
    def __init__(self, config: TransformerConfig, vocab_size: int):
        super().__init__(config, vocab_size)
        self.vocab_size = vocab_size
        self.layers = nn.ModuleList(DecoderLayer(config) for _ in range(config.decoder_layers))
        self.norm = stack_norm(config)
        self.output = nn.Linear(config.embed_dim, vocab_size, bias=config.output_bias)
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
