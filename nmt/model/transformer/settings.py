"""The Transformer's own model keys (``model.arch: transformer``): heads, the feed-forward width,
its two dropouts, positions. In YAML they sit beside the shared keys in ``model``; the config
reference lists them under the family."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal, cast

from nmt.config.ranges import MAX_WIDTH, below_one, between
from nmt.config.schema import ArchName, ModelConfig


@dataclass
class TransformerConfig(ModelConfig):
    """Pre-norm layers (nmt/model/transformer/layers.py), ``embed_dim`` wide."""

    arch: ArchName = "transformer"
    heads: int = 4  # attention heads in every layer; embed_dim must divide by it
    ff_dim: int = 1024  # the feed-forward network's inner width
    attention_dropout: float = 0.1  # dropout on the attention weights (dropout: on embeddings and residuals)
    activation_dropout: float = 0.0  # dropout inside the feed-forward network, after its ReLU
    positions: Literal["sinusoidal", "learned"] = "sinusoidal"  # how a position is encoded: a function or a table

    ranges: ClassVar[dict[str, tuple[Any, str]]] = {
        "heads": between(1, 64),
        "ff_dim": between(1, 4 * MAX_WIDTH),
        "attention_dropout": below_one,
        "activation_dropout": below_one,
    }


def transformer_settings(config: ModelConfig) -> TransformerConfig:
    """``config`` as the Transformer's settings: what a model of this family is always given
    (parsing builds the settings class its family registers), named for the type checker."""
    return cast(TransformerConfig, config)
