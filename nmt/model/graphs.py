"""The model as two graphs of flat, named tensors: what ONNX export traces (``nmt/export/onnx_graphs.py``)
and what an engine other than PyTorch runs (``nmt/runtime/onnx_engine.py``).

Search speaks to a model through ``encode`` and ``decode_step`` (``nmt/decoding/search.py``); their
memory and state are nested Python objects (an LSTM's (h, c) per layer, the step a Python int).
Here they are flat tensors with names, the step a tensor::

    encoder       src (B, S) int64
                  -> enc_outputs (B, S, 2H), keys, mask (B, S) bool, [src_embedded (B, S, E)], state_0 … state_n
    decoder_step  prev_tokens (B,) int64, step (1,) int64, enc_outputs, keys, mask, [src_embedded],
                  state_0 … state_n -> logits (B, V) float32, attention (B, S), state_0 … state_n (the next step's)

src_embedded is there with ``model.lexical`` (``memory_names``).

A Transformer's (``model.arch: transformer``) are its own: the memory is the source mask and each
decoder layer's cross-attention keys and values (B, heads, S, d); the state each layer's
self-attention cache (B, heads, t, d), empty (t = 0) from the encoder and one position longer
after each step; and the step also returns ``heads`` (B, layers, heads, S), every layer's
cross-attention, which the offline page draws::

    encoder       src (B, S) -> mask, cross_k_0, cross_v_0 … , self_k_0, self_v_0 … (t = 0)
    decoder_step  prev_tokens, step, mask, cross_k_0 … , self_k_0 … -> logits, attention (the last
                  layer's heads averaged), next_self_k_0 … (t + 1), heads

state_i are the decoder's cell states bottom layer first (h, or h then c, per layer), then
h̃_{t-1} with input feeding (``state_names``). The graphs run the encoder padded (packed
sequences do not export) and the decoder's fast step on the whole embedding (no per-vocabulary
table: the graph stays the size of the weights); the outputs are the model's own.
"""

from __future__ import annotations

import torch
from torch import nn

from nmt.config.schema import ModelConfig
from nmt.core.registry import CELLS
from nmt.data.tokenizer import PAD_ID
from nmt.model.base import TranslationModel
from nmt.model.cells import layer_parts, layer_state
from nmt.model.decoder import DecoderState, Memory
from nmt.model.seq2seq import Seq2Seq
from nmt.model.transformer import Transformer, TransformerMemory, TransformerState

MEMORY_NAMES = ("enc_outputs", "keys", "mask")


def memory_names(config: ModelConfig) -> list[str]:
    """The flat memory's names: the attention's three, and the source embeddings the lexical model
    reads; a Transformer's mask and each layer's cross-attention keys and values."""
    if config.arch == "transformer":
        return ["mask", *_per_layer("cross", config.decoder_layers)]
    return [*MEMORY_NAMES, *(["src_embedded"] if config.lexical else [])]


def state_names(config: ModelConfig) -> list[str]:
    """The flat decoder state's names: h_0 (c_0) h_1 (c_1) … [feed]; a Transformer's caches."""
    if config.arch == "transformer":
        return _per_layer("self", config.decoder_layers)
    parts = ("h", "c")[: CELLS[config.rnn].state_parts]
    names = [f"{part}_{layer}" for layer in range(config.decoder_layers) for part in parts]
    return names + (["feed"] if config.input_feeding else [])


def _per_layer(kind: str, layers: int) -> list[str]:
    return [f"{kind}_{part}_{layer}" for layer in range(layers) for part in ("k", "v")]


def flatten_state(state: DecoderState) -> list[torch.Tensor]:
    """A DecoderState's tensors in ``state_names`` order (its step is not among them)."""
    flat = [part for layer in state.stack for part in layer_parts(layer)]
    return flat + ([state.feed] if state.feed is not None else [])


def unflatten_state(tensors: list[torch.Tensor], config: ModelConfig, step: int | torch.Tensor = 0) -> DecoderState:
    """The inverse of ``flatten_state``."""
    parts = CELLS[config.rnn].state_parts
    cells = tuple(layer_state(tuple(tensors[i : i + parts])) for i in range(0, config.decoder_layers * parts, parts))
    feed = tensors[config.decoder_layers * parts] if config.input_feeding else None
    return DecoderState(cells, step, feed)


class EncoderGraph(nn.Module):
    """``Seq2Seq.encode`` with flat outputs, on the padded encoder (lengths from the padding)."""

    def __init__(self, model: Seq2Seq):
        super().__init__()
        self.model = model

    def forward(self, src: torch.Tensor) -> tuple[torch.Tensor, ...]:
        lengths = src.ne(PAD_ID).sum(1)  # (B,)
        memory, state = self.model.encode(src, lengths)
        extra = () if memory.src_embedded is None else (memory.src_embedded,)
        return (memory.enc_outputs, memory.keys, memory.mask, *extra, *flatten_state(state))


class DecoderStepGraph(nn.Module):
    """``Seq2Seq.decode_step`` with flat inputs and outputs; the step a tensor (1,)."""

    def __init__(self, model: Seq2Seq):
        super().__init__()
        self.model = model

    def forward(self, prev_tokens, step, *tensors) -> tuple[torch.Tensor, ...]:
        """tensors: the memory (``memory_names``), then the state (``state_names``)."""
        decoder = self.model.decoder
        held = len(memory_names(self.model.config))
        memory = Memory(*tensors[:held])
        current = unflatten_state(list(tensors[held:]), self.model.config, step)
        embedded = decoder.embedding(prev_tokens)  # (B, E); dropout is off in inference
        input_gates, rest_weight = decoder.rnn.split_input(embedded)  # (B, gates·H)
        cells, output, weights = decoder.step_body(input_gates, rest_weight, current.stack, current.feed, memory, step)
        feed = output[0] if decoder.input_feeding else None
        logits = decoder.readout(decoder.features(output, embedded), weights, memory)
        return (logits.float(), weights, *flatten_state(DecoderState(cells, 0, feed)))


def _interleaved(keys: list[torch.Tensor], values: list[torch.Tensor]) -> list[torch.Tensor]:
    """k_0, v_0, k_1, v_1, … (``_per_layer``'s order)."""
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


def graph_modules(model: TranslationModel) -> tuple[nn.Module, nn.Module]:
    """The encoder and decoder-step graphs of ``model``'s family."""
    if isinstance(model, Transformer):
        return TransformerEncoderGraph(model), TransformerStepGraph(model)
    assert isinstance(model, Seq2Seq)
    return EncoderGraph(model), DecoderStepGraph(model)
