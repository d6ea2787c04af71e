"""The RNN as two ONNX graphs of flat, named tensors (the layout nmt/model/graphs.py describes):
its memory the attention's three tensors (and the source embeddings with ``model.lexical``), its
state each decoder layer's cell state, then h̃_{t-1} with input feeding."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from nmt.config.schema import ModelConfig
from nmt.core.registry import CELLS
from nmt.data.tokenizer import PAD_ID
from nmt.model.base import OnnxGraphs, TranslationModel
from nmt.model.graphs import memory_names
from nmt.model.rnn.cells import layer_parts, layer_state
from nmt.model.rnn.decoder import DecoderState, Memory
from nmt.model.rnn.settings import RnnConfig, rnn_settings

MEMORY_NAMES = ("enc_outputs", "keys", "mask")


def _rnn_memory_names(given: ModelConfig) -> list[str]:
    """The attention's three, and the source embeddings the lexical model reads."""
    config = rnn_settings(given)
    return [*MEMORY_NAMES, *(["src_embedded"] if config.lexical else [])]


def _rnn_state_names(given: ModelConfig) -> list[str]:
    """h_0 (c_0) h_1 (c_1) … [feed]."""
    config = rnn_settings(given)
    parts = ("h", "c")[: CELLS[config.rnn].state_parts]
    names = [f"{part}_{layer}" for layer in range(config.decoder_layers) for part in parts]
    return names + (["feed"] if config.input_feeding else [])


def flatten_state(state: DecoderState) -> list[torch.Tensor]:
    """A DecoderState's tensors in ``state_names`` order (its step is not among them)."""
    flat = [part for layer in state.stack for part in layer_parts(layer)]
    return flat + ([state.feed] if state.feed is not None else [])


def unflatten_state(tensors: list[torch.Tensor], config: RnnConfig, step: int | torch.Tensor = 0) -> DecoderState:
    """The inverse of ``flatten_state``."""
    parts = CELLS[config.rnn].state_parts
    cells = tuple(layer_state(tuple(tensors[i : i + parts])) for i in range(0, config.decoder_layers * parts, parts))
    feed = tensors[config.decoder_layers * parts] if config.input_feeding else None
    return DecoderState(cells, step, feed)


class EncoderGraph(nn.Module):
    """``Seq2Seq.encode`` with flat outputs, on the padded encoder (lengths from the padding): it
    sets the model's encoder to run padded, since packed sequences do not export (the outputs are
    the same), so it is made on a copy of the model (export makes one)."""

    def __init__(self, model: Any):  # a Seq2Seq (nmt/model/rnn/model.py imports this module)
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

    def __init__(self, model: Any):  # a Seq2Seq (nmt/model/rnn/model.py imports this module)
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
