"""The Transformer as two ONNX graphs of flat, named tensors (the layout nmt/model/graphs.py
describes): its memory the source mask and each decoder layer's cross-attention keys and values,
its state each layer's self-attention cache, and every layer's heads as the step's last output."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from nmt.data.tokenizer import PAD_ID
from nmt.model.base import OnnxGraphs
from nmt.model.graphs import per_layer
from nmt.model.transformer.layers import TransformerMemory, TransformerState


def _interleaved(keys: list[torch.Tensor], values: list[torch.Tensor]) -> list[torch.Tensor]:
    """k_0, v_0, k_1, v_1, … (``per_layer``'s order)."""
    return [tensor for pair in zip(keys, values) for tensor in pair]


class TransformerEncoderGraph(nn.Module):
    """``Transformer.encode`` with flat outputs: the memory, then the empty caches."""

    def __init__(self, model: Any):  # a Transformer (its module imports this one)
        super().__init__()
        self.model = model

    def forward(self, src: torch.Tensor) -> tuple[torch.Tensor, ...]:
        memory, state = self.model.encode(src, src.ne(PAD_ID).sum(1))
        return (memory.mask, *_interleaved(memory.keys, memory.values), *_interleaved(state.keys, state.values))


class TransformerStepGraph(nn.Module):
    """``Transformer.decode_step`` with flat inputs and outputs, every layer's heads last."""

    def __init__(self, model: Any):  # a Transformer (its module imports this one)
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


def _transformer_modules(model: Any) -> tuple[nn.Module, nn.Module]:  # a Transformer
    return TransformerEncoderGraph(model), TransformerStepGraph(model)


TRANSFORMER_GRAPHS = OnnxGraphs(
    lambda config: ["mask", *per_layer("cross", config.decoder_layers)],  # the mask, each layer's keys and values
    lambda config: per_layer("self", config.decoder_layers),  # each layer's cache
    _transformer_modules,
    steps_before_tracing=2,
    extra_outputs=("heads",),
    axes=transformer_axes,
)
