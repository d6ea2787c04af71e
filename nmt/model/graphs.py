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

A Transformer's (``model.arch: transformer``; nmt/model/transformer/graphs.py) are
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

from nmt.config.schema import ModelConfig
from nmt.core.errors import NmtError
from nmt.core.registry import ARCHITECTURES
from nmt.model.base import OnnxGraphs


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


def per_layer(kind: str, layers: int) -> list[str]:
    return [f"{kind}_{part}_{layer}" for layer in range(layers) for part in ("k", "v")]
