"""The RNN's own model keys (``model.arch: rnn``): the cell, the attention and its window, the
decoder's order and widths, the lexical model. In YAML they sit beside the shared keys in
``model``; the config reference lists them under the family."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal, cast

from nmt.config.ranges import MAX_WIDTH, below_one, between, positive
from nmt.config.schema import ArchName, ModelConfig
from nmt.core.registry import ATTENTIONS, CELLS

# Allowed values come from the registries: a new attention (nmt/model/rnn/attention.py) or cell
# (nmt/model/rnn/cells.py) is one entry there, nothing here.
AttentionName = Annotated[str, ATTENTIONS]
CellName = Annotated[str, CELLS]
WINDOWS = ("global", "local-m", "local-p")  # where attention may look (nmt/model/rnn/attention.py: Window)
WindowName = Literal[WINDOWS]  # type: ignore[valid-type]
RnnInput = Literal["auto", "packed", "padded"]


@dataclass
class RnnConfig(ModelConfig):
    arch: ArchName = "rnn"
    encoder_hidden: int = 256  # per direction; encoder states are 2x this wide
    decoder_hidden: int = 256  # the decoder cell's size
    rnn: CellName = "gru"  # the recurrent cell of encoder and decoder: gru | lstm
    attention: AttentionName = "bahdanau"  # luong-* use Luong's decoder order; none = Cho et al.
    attention_window: WindowName = "global"  # global, or Luong et al.'s local-m / local-p windows (not with none)
    window_width: int = 5  # D: local windows cover [p_t - D, p_t + D]
    input_feeding: bool = False  # Luong: feed the attentional vector h̃_{t-1} into the next step
    bridge: Literal["backward", "both"] = "backward"  # s_0 from ←h_1 (Bahdanau) or from [→h_S; ←h_1]
    gumbel_temperature: float = 1.0  # hard attention's Gumbel-softmax temperature in training
    attention_dim: int = 256  # width of the additive (bahdanau, luong-concat, hard) scorer
    output_dim: int = 256  # width of the pre-softmax layer (Luong: of h̃_t)
    # a lexical model (Nguyen & Chiang, 2018): the attention-weighted source embeddings add their
    # own term to the logits, a shortcut from source words to target words for small corpora
    lexical: bool = False
    encoder_output_dropout: float = 0.0  # dropout on the encoder's outputs h_j, the attention's memory (training only)
    # How the encoder's RNN is run (same weights, same outputs): packed sequences, or one padded
    # call per direction with each sentence reversed within its length (docs/benchmarks.md);
    # auto: padded on Apple's MPS (packed sequences have open faults there), packed elsewhere
    rnn_input: RnnInput = "auto"

    widths: ClassVar[tuple[str, ...]] = ("embed_dim", "encoder_hidden", "decoder_hidden", "attention_dim", "output_dim")
    # rnn_input runs the same weights either way; the temperature only shapes hard attention's training
    free_keys: ClassVar[tuple[str, ...]] = ("dropout", "gumbel_temperature", "rnn_input")
    ranges: ClassVar[dict[str, tuple[Any, str]]] = {
        "encoder_hidden": between(1, MAX_WIDTH),
        "decoder_hidden": between(1, MAX_WIDTH),
        "attention_dim": between(1, MAX_WIDTH),
        "window_width": between(1, 1000),
        "gumbel_temperature": positive,
        "output_dim": between(1, MAX_WIDTH),
        "encoder_output_dropout": below_one,
    }


def rnn_settings(config: ModelConfig) -> RnnConfig:
    """``config`` as the RNN's settings: what a model of this family is always given (parsing
    builds the settings class its family registers), named for the type checker."""
    return cast(RnnConfig, config)
