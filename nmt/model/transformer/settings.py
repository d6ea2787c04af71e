"""The Transformer's own model keys (``model.arch: transformer``): heads, the feed-forward width,
its two dropouts, and the shape of its layers — where they normalise, their activation, how a
position is encoded, whether embeddings are scaled — in the forms the published models take
(Marian/OPUS-MT, fairseq's M2M100/NLLB), so that those load here and ours load there. In YAML
they sit beside the shared keys in ``model``; the config reference lists them under the family."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal, cast

from nmt.config.ranges import MAX_WIDTH, below_one, between
from nmt.config.schema import ArchName, ModelConfig


@dataclass
class TransformerConfig(ModelConfig):
    """The layers of nmt/model/transformer/layers.py, ``embed_dim`` wide: pre-norm, ReLU,
    interleaved sinusoids and scaled embeddings unless set otherwise."""

    arch: ArchName = "transformer"
    heads: int = 4  # attention heads in every layer; embed_dim must divide by it
    ff_dim: int = 1024  # the feed-forward network's inner width
    attention_dropout: float = 0.1  # dropout on the attention weights (dropout: on embeddings and residuals)
    activation_dropout: float = 0.0  # dropout inside the feed-forward network, after its activation
    # how a position is encoded: sinusoidal (sin and cos of each frequency side by side, from position 0),
    # marian (the sines, then the cosines, from 0: Marian's, OPUS-MT's), fairseq (sines then cosines with
    # fairseq's spacing, from position 2: M2M100's, NLLB's), or learned (a table)
    positions: Literal["sinusoidal", "learned", "marian", "fairseq"] = "sinusoidal"
    # where each layer normalises: pre (before each block, and once atop each stack: trains without a
    # fragile warm-up on small corpora; M2M100's, NLLB's) or post (after each residual sum: the 2017 paper's, Marian's)
    norm: Literal["pre", "post"] = "pre"
    activation: Literal["relu", "swish", "gelu"] = "relu"  # the feed-forward network's (OPUS-MT's: swish)
    scale_embeddings: bool = True  # multiply the embeddings by √embed_dim before the positions are added
    # the output layer adds a learned bias per target piece (M2M100's and NLLB's has none: false exports
    # to their class, nmt export --hf)
    output_bias: bool = True

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
