"""The Transformer as a CTranslate2 model, built through CTranslate2's own spec API
(``ctranslate2.specs.TransformerSpec``): no hand-written file format, CTranslate2 validates and
writes it. What maps where (CTranslate2's names on the right)::

    embeddings E, scaled by √width or not    embeddings.weight, scale_embeddings
    positions (any model.positions)          position_encodings.encodings: our table, whole
    pre- or post-norm layers, their LNs      pre_norm, <block>.layer_norm
    self-attention [W^Q; W^K; W^V]           self_attention.linear[0] (keys without a bias: zeros)
    cross-attention W^Q, [W^K; W^V], W^O     attention.linear[0], [1], [2]
    feed-forward, its activation             ffn.linear_0, ffn.linear_1, activation
    the last LN of each stack (pre-norm)     encoder.layer_norm, decoder.layer_norm
    output layer (tied or not)               decoder.projection (a tied table is written twice)

The attention CTranslate2 returns is the last decoder layer's, every head averaged: the weights
this toolkit's Transformer shows (``alignment_layer``, ``alignment_heads``). LayerNorm's epsilon
is PyTorch's default, 1e-5. Sources end with <eos> (``add_source_eos``), targets start from <bos>.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from nmt import install_hint
from nmt.core.errors import NmtError
from nmt.data.tokenizer import BOS, EOS, UNK

POSITION_ROWS = 1024  # positions written into the model: more than decoding ever reaches (decode.max_input_len)
ACTIVATIONS = {"relu": 0, "swish": 2, "gelu": 3}  # model.activation -> ctranslate2.specs.common_spec.Activation


def ctranslate2_module() -> Any:
    try:
        import ctranslate2
    except ImportError:
        raise NmtError(f"CTranslate2 is not installed: {install_hint('ctranslate2', 'ctranslate2')}.") from None
    return ctranslate2


def transformer_spec(model: Any, src_pieces: list[str], tgt_pieces: list[str]) -> Any:
    """A CTranslate2 ``TransformerSpec`` holding ``model``'s weights (a ``Transformer``, in eval
    mode) and the vocabularies' pieces in id order."""
    ctranslate2_module()
    from ctranslate2.specs import TransformerSpec, common_spec

    config = model.config
    spec = TransformerSpec.from_config(
        (config.encoder_layers, config.decoder_layers),
        config.heads,
        pre_norm=config.norm == "pre",
        activation=common_spec.Activation(ACTIVATIONS[config.activation]),
        alignment_layer=-1,
        alignment_heads=config.heads,
    )
    spec.config.unk_token, spec.config.bos_token, spec.config.eos_token = UNK, BOS, EOS
    spec.config.decoder_start_token = BOS
    spec.config.add_source_eos = True
    spec.config.layer_norm_epsilon = 1e-5
    spec.encoder.scale_embeddings = spec.decoder.scale_embeddings = config.scale_embeddings  # (Embedder.scale)
    with torch.no_grad():
        _embeddings(spec.encoder.embeddings[0], spec.encoder.position_encodings, model.encoder)
        _embeddings(spec.decoder.embeddings, spec.decoder.position_encodings, model.decoder)
        for layer_spec, layer in zip(spec.encoder.layer, model.encoder.layers):
            _self_attention(layer_spec.self_attention, layer.self_norm, layer.self_attention)
            _feed_forward(layer_spec.ffn, layer.ff_norm, layer.feed_forward)
        for layer_spec, layer in zip(spec.decoder.layer, model.decoder.layers):
            _self_attention(layer_spec.self_attention, layer.self_norm, layer.self_attention)
            _cross_attention(layer_spec.attention, layer.cross_norm, layer.cross_attention)
            _feed_forward(layer_spec.ffn, layer.ff_norm, layer.feed_forward)
        if config.norm == "pre":
            _norm(spec.encoder.layer_norm, model.encoder.norm)
            _norm(spec.decoder.layer_norm, model.decoder.norm)
        _linear(spec.decoder.projection, model.decoder.output)
    spec.register_source_vocabulary(src_pieces)
    spec.register_target_vocabulary(tgt_pieces)
    return spec


def _array(tensor: torch.Tensor) -> np.ndarray:
    return tensor.detach().float().cpu().numpy().copy()


def _embeddings(embedding_spec: Any, positions_spec: Any, embedder: Any) -> None:
    embedding_spec.weight = _array(embedder.embedding.weight)  # scaled by √width: the stacks' scale_embeddings
    table = embedder.positions(0, POSITION_ROWS, torch.device("cpu"))  # (rows, width)
    positions_spec.encodings = _array(table)


def _norm(norm_spec: Any, norm: nn.LayerNorm) -> None:
    norm_spec.gamma, norm_spec.beta = _array(norm.weight), _array(norm.bias)


def _linear(linear_spec: Any, linear: nn.Linear) -> None:
    linear_spec.weight = _array(linear.weight)
    # an output layer without a bias (model.output_bias: false) adds zeros, as the layout writes one
    linear_spec.bias = _array(linear.bias) if linear.bias is not None else np.zeros(linear.out_features, np.float32)


def _key_value(attention: Any) -> tuple[np.ndarray, np.ndarray]:
    """[W^K; W^V] and its bias [0; b_V] (the keys take none)."""
    width = attention.value_bias.numel()
    bias = torch.cat([torch.zeros(width), attention.value_bias.detach().float().cpu()])
    return _array(attention.key_value.weight), _array(bias)


def _self_attention(spec: Any, norm: nn.LayerNorm, attention: Any) -> None:
    _norm(spec.layer_norm, norm)
    key_value, key_value_bias = _key_value(attention)
    spec.linear[0].weight = np.concatenate([_array(attention.query.weight), key_value])
    spec.linear[0].bias = np.concatenate([_array(attention.query.bias), key_value_bias])
    _linear(spec.linear[1], attention.out)


def _cross_attention(spec: Any, norm: nn.LayerNorm, attention: Any) -> None:
    _norm(spec.layer_norm, norm)
    _linear(spec.linear[0], attention.query)
    spec.linear[1].weight, spec.linear[1].bias = _key_value(attention)
    _linear(spec.linear[2], attention.out)


def _feed_forward(spec: Any, norm: nn.LayerNorm, feed_forward: Any) -> None:
    _norm(spec.layer_norm, norm)
    _linear(spec.linear_0, feed_forward.inner)
    _linear(spec.linear_1, feed_forward.outer)
