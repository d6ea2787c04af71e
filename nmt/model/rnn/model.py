"""The RNN family's registry entry (``model.arch: rnn``, ``Seq2Seq``): encoder, bridge and decoder
assembled into the translation model, and the facts the rest of the toolkit reads of it."""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import nn

from nmt.config.schema import Config, ModelConfig
from nmt.core.errors import NmtError
from nmt.core.registry import ARCHITECTURES, ATTENTIONS, CELLS
from nmt.data.tokenizer import PAD_ID
from nmt.model.base import OnnxGraphs, TranslationModel
from nmt.model.fast import compile_step_body, run_in_float32
from nmt.model.rnn.decoder import DecoderState, Memory, build_decoder
from nmt.model.rnn.encoder import Encoder, encoder_input
from nmt.model.rnn.graphs import RNN_GRAPHS
from nmt.model.rnn.settings import RnnConfig, rnn_settings

FED_WEIGHT = "decoder.rnn.weight_ih_l0"  # (gates·H, E [+ O with input feeding]): [E y_{t-1}; h̃_{t-1}] in
LEXICAL_PREFIX = "decoder.lexical."  # model.lexical's tensors

# nmt tune's default space for the RNN: what docs/quality.md found to matter on eng-mar, as ranges around its recipes.
RNN_SPACE: dict[str, dict] = {
    "model.width": {"choices": [128, 256, 384]},
    "model.dropout": {"low": 0.1, "high": 0.5},
    "model.attention": {},  # the registered soft ones: Seq2Seq.tune_space()
    "model.input_feeding": {"choices": [False, True]},
    "tokenizer.src_vocab_size": {"choices": [1000, 2000, 4000]},
    "tokenizer.tgt_vocab_size": {"choices": [1000, 2000, 4000]},
    "train.learning_rate": {"low": 0.0005, "high": 0.005, "log": True},
    "train.lr_hold": {"low": 0.0, "high": 0.9},
    "train.label_smoothing": {"low": 0.0, "high": 0.3},
    "train.word_dropout": {"low": 0.0, "high": 0.2},
    "train.batch_size": {"choices": [32, 64, 128]},
    "train.patience": {"choices": [0, 5, 10]},
}


@ARCHITECTURES.register("rnn")
class Seq2Seq(TranslationModel):
    """RNN encoder-decoder with attention (or, with ``attention: none``, a fixed summary).

    Training calls ``forward``; search uses ``encode`` and ``decode_step`` (the
    ``SearchModel`` protocol of ``nmt.decoding.search``).
    """

    settings = RnnConfig
    config: RnnConfig
    title = "attention-based RNN translation model"
    recurrent = True
    freezable: ClassVar[dict[str, tuple[str, ...]]] = {
        **TranslationModel.freezable,
        "bridge": ("bridge.",),
        "attention": ("decoder.attention.",),
    }
    addable = ("input_feeding", "lexical")
    lab_view = "nmt.pipelines.rnn_lab:RnnInside"

    @classmethod
    def describe(cls, given: ModelConfig) -> str:
        m = rnn_settings(given)
        return (
            f"embeddings {m.embed_dim}, bidirectional {m.rnn.upper()} {m.encoder_hidden} per direction × "
            f"{m.encoder_layers} layer(s), {m.rnn.upper()} decoder {m.decoder_hidden} × {m.decoder_layers} layer(s), "
            f"attention `{m.attention}` (window `{m.attention_window}`, input feeding {m.input_feeding})"
        )

    @classmethod
    def summary(cls, given: ModelConfig) -> str:
        config = rnn_settings(given)
        return f"{config.attention}{' + input feeding' if config.input_feeding else ''}"

    @classmethod
    def served_settings(cls, given: ModelConfig) -> dict:
        config = rnn_settings(given)
        return {
            **super().served_settings(given),
            "attention": config.attention,
            "input_feeding": config.input_feeding,
            "rnn": config.rnn,
            "attention_window": config.attention_window,
        }

    @classmethod
    def shows_attention(cls, given: ModelConfig) -> bool:
        config = rnn_settings(given)
        return ATTENTIONS[config.attention].has_weights  # `none` (Cho et al.) has nothing to draw

    @classmethod
    def check_model(cls, given: ModelConfig) -> None:
        """What the attention can do is on its registry entry (``AttentionKind``)."""
        model = rnn_settings(given)
        kind = ATTENTIONS[model.attention]
        if not kind.takes_window and model.attention_window != "global":
            raise NmtError(
                f"model.attention_window={model.attention_window!r} restricts attention, but model.attention "
                f"{model.attention!r} cannot be windowed. Use attention_window: global, or another attention: "
                f"{', '.join(name for name, k in ATTENTIONS.items() if k.takes_window)}."
            )
        luong = [name for name, k in ATTENTIONS.items() if k.order == "recur-then-attend"]
        if model.input_feeding and kind.order != "recur-then-attend":
            raise NmtError(
                f"model.input_feeding=true is Luong et al.'s and works with model.attention in {', '.join(luong)}; "
                f"got {model.attention!r} (its decoder already feeds the context c_t into each step)."
            )
        if model.lexical and not kind.has_weights:
            raise NmtError(
                f"model.lexical=true reads the source words under the attention's weights, and model.attention "
                f"{model.attention!r} has none. Use another attention: "
                f"{', '.join(name for name, k in ATTENTIONS.items() if k.has_weights)}."
            )
        if kind.needs_equal_widths and model.decoder_hidden != 2 * model.encoder_hidden:
            raise NmtError(
                f"model.attention={model.attention!r} compares decoder and encoder states directly, so "
                f"model.decoder_hidden ({model.decoder_hidden}) must equal 2 x model.encoder_hidden "
                f"({2 * model.encoder_hidden}): --set model.decoder_hidden={2 * model.encoder_hidden}, or "
                f"--set model.encoder_hidden={model.decoder_hidden // 2}"
                + (f" --set model.decoder_hidden={model.decoder_hidden // 2 * 2}" if model.decoder_hidden % 2 else "")
                + "."
            )

    @classmethod
    def check_training(cls, config: Config) -> None:
        """train.guided_alignment pulls soft weights toward the links: an attention of none, or
        of one position per step, has nothing to pull."""
        attention = rnn_settings(config.model).attention
        kind = ATTENTIONS[attention]
        if config.train.guided_alignment and (not kind.has_weights or kind.one_position):
            guidable = [n for n, k in ATTENTIONS.items() if k.has_weights and not k.one_position]
            raise NmtError(
                f"Config key 'train.guided_alignment' guides soft attention weights, and model.attention "
                f"{attention!r} has {'none' if not kind.has_weights else 'one position a step'}: "
                f"use one of {', '.join(guidable)}, or train.guided_alignment: 0."
            )

    def cross_attention(
        self,
        src: torch.Tensor,
        src_lengths: torch.Tensor,
        tgt_in: torch.Tensor,
        layer: int | None = None,
        heads: list[int] | None = None,
    ) -> torch.Tensor:
        if not ATTENTIONS[self.config.attention].has_weights:
            raise NmtError(f"model.attention {self.config.attention!r} has no weights over the source to align with.")
        return super().cross_attention(src, src_lengths, tgt_in, layer, heads)

    def training_notes(self, config: Config, device: torch.device) -> list[str]:
        """Where model.rnn_input: auto runs the padded encoder (``encoder_input``), and why."""
        encoder = self.encoder
        if encoder.rnn_input != "auto" or encoder_input("auto", device, encoder.stacked_dropout) != "padded":
            return []
        why = (
            "packed sequences have open faults on MPS"
            if device.type == "mps"
            else "cuDNN's own dropout between stacked layers could not be resumed exactly"
        )
        return [f"The encoder runs padded ({why}); model.rnn_input: packed overrides."]

    @classmethod
    def tune_space(cls) -> dict[str, dict]:
        """``RNN_SPACE``, ``model.attention`` choosing among every registered soft attention that takes
        any widths: the built-ins' bahdanau, luong-general and luong-concat, and a plugin's."""
        soft = [n for n, k in ATTENTIONS.items() if k.has_weights and not k.one_position and not k.needs_equal_widths]
        return {**RNN_SPACE, "model.attention": {"choices": soft}}

    @classmethod
    def playback_numbers(cls, given: ModelConfig, source: int, target: int, top_k: int) -> int:
        model = rnn_settings(given)
        width = max(model.decoder_hidden, model.attention_dim, 2 * model.encoder_hidden)
        return target * (width + 3 * source + 2 * model.encoder_hidden + 2 * top_k)

    @classmethod
    def onnx_graphs(cls) -> OnnxGraphs:
        return RNN_GRAPHS

    def __init__(self, config: RnnConfig, src_vocab_size: int, tgt_vocab_size: int, joint_vocabulary: bool = False):
        super().__init__()
        self.config = config
        self.tgt_vocab_size = tgt_vocab_size
        self.encoder = Encoder(config, src_vocab_size)
        # Bridge (Bahdanau et al., A.2.2): s_0 = tanh(W_s ←h_1); with bridge "both",
        # s_0 = tanh(W_s [→h_S; ←h_1]): each direction's summary of the whole sentence. One
        # projection gives every decoder layer its state, an LSTM's memory cell c_0 included
        # (``RecurrentStack.initial_state``), as Sutskever et al. and Luong et al. start the
        # decoder from the encoder's final (h, c): here through W_s, the encoder being bidirectional.
        bridge_width = config.encoder_hidden * (2 if config.bridge == "both" else 1)
        state_width = config.decoder_hidden * config.decoder_layers * CELLS[config.rnn].state_parts
        self.bridge = nn.Linear(bridge_width, state_width)
        self.decoder = build_decoder(config, tgt_vocab_size, self.encoder.output_dim)
        if joint_vocabulary and src_vocab_size == tgt_vocab_size:  # tokenizer.joint: one table for both sides
            self.decoder.share_embedding(self.encoder.embedding)

    def encode(self, src: torch.Tensor, src_lengths: torch.Tensor) -> tuple[Memory, DecoderState]:
        """src (B, S), src_lengths (B,) -> encoder memory and the decoder's first state."""
        enc_outputs, backward_final = self.encoder(src, src_lengths)
        mask = src.ne(PAD_ID)  # (B, S): the real tokens, <eos> included (src_lengths stay on the CPU)
        keys = self.decoder.attention.precompute_keys(enc_outputs, mask)
        summary = backward_final  # (B, H) or, from both directions, (B, 2H)
        if self.config.bridge == "both":
            summary = torch.cat([last_forward_state(enc_outputs, mask), backward_final], dim=-1)
        # the decoder's first state, float32 under autocast like every recurrent state
        state = self.decoder.init_state(run_in_float32(self.bridge, summary))
        # the lexical model reads the source embeddings under the attention (dropout at the readout)
        src_embedded = self.encoder.embedding(src) if self.config.lexical else None  # (B, S, E)
        return Memory(enc_outputs, keys, mask, src_embedded), state

    def decode_step(
        self, prev_tokens: torch.Tensor, state: DecoderState, memory: Memory
    ) -> tuple[torch.Tensor, DecoderState, torch.Tensor]:
        """prev_tokens (B,) -> logits (B, V) of the next token (float32), new state, attention (B, S).

        Logits, not log-probabilities: search normalises only what it keeps (see ``nmt.decoding.search``)."""
        logits, state, weights = self.decoder.step(prev_tokens, state, memory)
        return logits.float(), state, weights

    def forward(
        self, src: torch.Tensor, src_lengths: torch.Tensor, tgt_in: torch.Tensor, teacher_forcing: float = 1.0
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Teacher-forced pass: logits (B, T, V) and attention weights (B, T, S)."""
        memory, state = self.encode(src, src_lengths)
        return self.decoder(tgt_in, state, memory, teacher_forcing)

    @torch.no_grad()
    def grow_from(self, name: str, parent_weight: torch.Tensor | None, weight: torch.Tensor) -> tuple[str, str] | None:
        """Input feeding added: the decoder's first input weights gain columns for h̃_{t-1}, which
        start at zero (the recurrence is the parent's at the start). The lexical model added: its
        tensors keep their initialisation, its output starting at zero."""
        if name == FED_WEIGHT and parent_weight is not None and _feeds_more(parent_weight, weight):
            weight.zero_()
            weight[:, : parent_weight.shape[1]] = parent_weight
            added = weight.shape[1] - parent_weight.shape[1]
            return "feed", f"input feeding added: the decoder's {added} fed inputs start at zero"
        if parent_weight is None and name.startswith(LEXICAL_PREFIX):
            return "lexical", "lexical model added: its term starts at zero"
        return None

    def compile_steps(self, mode: str, backend: str = "inductor") -> None:
        """``train.compile``: compile the decoder's per-step body (fast path)."""
        compile_step_body(self.decoder, mode, backend)


def _feeds_more(parent_weight: torch.Tensor, weight: torch.Tensor) -> bool:
    """The child's decoder input weight is the parent's with columns added for h̃_{t-1}."""
    return parent_weight.shape[0] == weight.shape[0] and parent_weight.shape[1] < weight.shape[1]


def last_forward_state(enc_outputs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """→h_S, the forward RNN's state at each sentence's last real token: (B, S, 2H) -> (B, H)."""
    last = (mask.sum(1) - 1).clamp(min=0)  # (B,) position of the last real token
    rows = torch.arange(enc_outputs.size(0), device=enc_outputs.device)
    return enc_outputs[rows, last, : enc_outputs.size(-1) // 2]
