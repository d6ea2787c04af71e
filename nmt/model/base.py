"""What every model family (``model.arch``: the ``ARCHITECTURES`` registry) is: a
``TranslationModel``, and ``build_model``, the one way to make one from a config.

Training calls ``forward``; search calls ``encode`` and ``decode_step`` (the ``SearchModel``
protocol of ``nmt.decoding.search``), whose memory and state are the family's own types, each
with a ``select`` of rows. So the trainer, search, ensembles, packages and transfer work on any
family: the RNN (nmt/model/seq2seq.py), the Transformer (nmt/model/transformer.py), a plugin's.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from nmt.config.schema import ModelConfig
from nmt.core.registry import ARCHITECTURES


class TranslationModel(nn.Module):
    """An encoder-decoder of one family. Its weights' names start ``encoder.embedding.`` and
    ``decoder.embedding.`` / ``decoder.output.`` for the vocabulary-indexed tensors (what transfer
    maps row by row), ``encoder.`` and ``decoder.`` for the rest (what ``train.freeze`` names)."""

    config: ModelConfig
    tgt_vocab_size: int  # the output layer's size
    # the model keys this family reads (nmt/config/schema.py refuses another family's keys)
    config_keys: tuple[str, ...] = ()

    def encode(self, src: torch.Tensor, src_lengths: torch.Tensor) -> tuple[Any, Any]:
        """src (B, S), src_lengths (B,) on the CPU -> (memory, the decoder's first state)."""
        raise NotImplementedError

    def decode_step(self, prev_tokens: torch.Tensor, state: Any, memory: Any) -> tuple[torch.Tensor, Any, torch.Tensor]:
        """prev_tokens (B,) -> logits (B, V) float32, the new state, attention weights (B, S)."""
        raise NotImplementedError

    def compile_steps(self, mode: str, backend: str = "inductor") -> None:
        """``train.compile``: compile what runs most often."""
        raise NotImplementedError


def build_model(
    config: ModelConfig, src_vocab_size: int, tgt_vocab_size: int, joint_vocabulary: bool = False
) -> TranslationModel:
    """A new model of the family ``config.arch`` names, freshly initialised."""
    return ARCHITECTURES[config.arch](config, src_vocab_size, tgt_vocab_size, joint_vocabulary)


def count_parameters(model: nn.Module) -> int:
    """The weights training updates."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
