"""Assembling encoder, bridge and decoder into the translation model."""

from __future__ import annotations

import torch
from torch import nn

from nmt.config.schema import ModelConfig
from nmt.core.registry import ARCHITECTURES, CELLS
from nmt.data.tokenizer import PAD_ID
from nmt.model.base import TranslationModel
from nmt.model.decoder import DecoderState, Memory, build_decoder
from nmt.model.encoder import Encoder
from nmt.model.fast import compile_step_body, run_in_float32

# The model keys both families read (the rest are each family's own: ``config_keys``).
SHARED_KEYS = ("embed_dim", "encoder_layers", "decoder_layers", "dropout", "tie_embeddings")


@ARCHITECTURES.register("rnn")
class Seq2Seq(TranslationModel):
    """RNN encoder-decoder with attention (or, with ``attention: none``, a fixed summary).

    Training calls ``forward``; search uses ``encode`` and ``decode_step`` (the
    ``SearchModel`` protocol of ``nmt.decoding.search``).
    """

    config_keys = SHARED_KEYS + (
        "encoder_hidden",
        "decoder_hidden",
        "rnn",
        "attention",
        "attention_window",
        "window_width",
        "input_feeding",
        "bridge",
        "gumbel_temperature",
        "attention_dim",
        "output_dim",
        "lexical",
        "encoder_output_dropout",
        "rnn_input",
    )

    def __init__(self, config: ModelConfig, src_vocab_size: int, tgt_vocab_size: int, joint_vocabulary: bool = False):
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

    def compile_steps(self, mode: str, backend: str = "inductor") -> None:
        """``train.compile``: compile the decoder's per-step body (fast path)."""
        compile_step_body(self.decoder, mode, backend)


def last_forward_state(enc_outputs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """→h_S, the forward RNN's state at each sentence's last real token: (B, S, 2H) -> (B, H)."""
    last = (mask.sum(1) - 1).clamp(min=0)  # (B,) position of the last real token
    rows = torch.arange(enc_outputs.size(0), device=enc_outputs.device)
    return enc_outputs[rows, last, : enc_outputs.size(-1) // 2]
