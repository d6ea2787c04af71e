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

A Transformer's (``model.arch: transformer``; its graph modules are in nmt/model/transformer.py) are
its own: the memory is the source mask and each decoder layer's cross-attention keys and values (B,
heads, S, d); the state each layer's self-attention cache (B, heads, t, d), empty (t = 0) from the
encoder and one position longer after each step; and the step also returns ``heads`` (B, layers,
heads, S), every layer's cross-attention, which the offline page draws::

    encoder       src (B, S) -> mask, cross_k_0, cross_v_0 … , self_k_0, self_v_0 … (t = 0)
    decoder_step  prev_tokens, step, mask, cross_k_0 … , self_k_0 … -> logits, attention (the last
                  layer's heads averaged), next_self_k_0 … (t + 1), heads

state_i are the decoder's cell states bottom layer first (h, or h then c, per layer), then
h̃_{t-1} with input feeding (``state_names``). The graphs run the encoder padded (packed
sequences do not export) and the decoder's fast step on the whole embedding (no per-vocabulary
table: the graph stays the size of the weights); the outputs are the model's own.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from nmt.config.schema import ModelConfig
from nmt.core.errors import NmtError
from nmt.core.registry import ARCHITECTURES, CELLS
from nmt.data.tokenizer import PAD_ID
from nmt.model.base import OnnxGraphs, TranslationModel
from nmt.model.cells import layer_parts, layer_state
from nmt.model.decoder import DecoderState, Memory

MEMORY_NAMES = ("enc_outputs", "keys", "mask")


def memory_names(config: ModelConfig) -> list[str]:
    """The flat memory's names of ``config``'s family."""
    return _graphs(config).memory_names(config)


def state_names(config: ModelConfig) -> list[str]:
    """The flat decoder state's names of ``config``'s family."""
    return _graphs(config).state_names(config)


def _graphs(config: ModelConfig) -> OnnxGraphs:
    graphs = ARCHITECTURES[config.arch].onnx_graphs()
    if graphs is None:
        raise NmtError(f"model.arch {config.arch!r} has no ONNX graphs (its registry entry's onnx_graphs).")
    return graphs


def _rnn_memory_names(config: ModelConfig) -> list[str]:
    """The attention's three, and the source embeddings the lexical model reads."""
    return [*MEMORY_NAMES, *(["src_embedded"] if config.lexical else [])]


def _rnn_state_names(config: ModelConfig) -> list[str]:
    """h_0 (c_0) h_1 (c_1) … [feed]."""
    parts = ("h", "c")[: CELLS[config.rnn].state_parts]
    names = [f"{part}_{layer}" for layer in range(config.decoder_layers) for part in parts]
    return names + (["feed"] if config.input_feeding else [])


def per_layer(kind: str, layers: int) -> list[str]:
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
    """``Seq2Seq.encode`` with flat outputs, on the padded encoder (lengths from the padding): it
    sets the model's encoder to run padded, since packed sequences do not export (the outputs are
    the same), so it is made on a copy of the model (export makes one)."""

    def __init__(self, model: Any):  # a Seq2Seq (nmt/model/seq2seq.py imports this module)
        super().__init__()
        model.encoder.rnn_input = "padded"
        self.model = model

    def forward(self, src: torch.Tensor) -> tuple[torch.Tensor, ...]:
        lengths = src.ne(PAD_ID).sum(1)  # (B,)
        memory, state = self.model.encode(src, lengths)
        extra = () if memory.src_embedded is None else (memory.src_embedded,)
        return (memory.enc_outputs, memory.keys, memory.mask, *extra, *flatten_state(state))


class DecoderStepGraph(nn.Module):
    """``Seq2Seq.decode_step`` with flat inputs and outputs; the step a tensor (1,)."""

    def __init__(self, model: Any):  # a Seq2Seq (nmt/model/seq2seq.py imports this module)
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


def _rnn_modules(model: TranslationModel) -> tuple[nn.Module, nn.Module]:
    return EncoderGraph(model), DecoderStepGraph(model)


RNN_GRAPHS = OnnxGraphs(_rnn_memory_names, _rnn_state_names, _rnn_modules)
