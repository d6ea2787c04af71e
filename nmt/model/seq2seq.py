"""Assembling encoder, bridge and decoder into the translation model."""

from __future__ import annotations

import torch
from torch import nn

from nmt.config import LUONG_ATTENTIONS, ModelConfig
from nmt.model.attention import build_attention
from nmt.model.decoder import BahdanauDecoder, DecoderState, LuongDecoder, Memory
from nmt.model.encoder import Encoder


class Seq2Seq(nn.Module):
    """RNN encoder-decoder with attention (or, with ``attention: none``, a fixed summary).

    Search uses only ``encode`` and ``decode_step``; training uses ``forward``.
    """

    def __init__(self, config: ModelConfig, src_vocab_size: int, tgt_vocab_size: int):
        super().__init__()
        self.config = config
        self.encoder = Encoder(
            src_vocab_size, config.embed_dim, config.encoder_hidden, config.encoder_layers, config.dropout, config.rnn_input
        )
        enc_dim = self.encoder.output_dim
        # Bridge (Bahdanau et al., A.2.2): s_0 = tanh(W_s ←h_1).
        self.bridge = nn.Linear(config.encoder_hidden, config.decoder_hidden)
        attention = build_attention(
            config.attention,
            config.decoder_hidden,
            enc_dim,
            config.attention_dim,
            config.attention_window,
            config.window_width,
            config.gumbel_temperature,
        )
        sizes = (tgt_vocab_size, config.embed_dim, config.decoder_hidden, enc_dim, attention, config.output_dim, config.dropout)
        if config.attention in LUONG_ATTENTIONS:
            self.decoder = LuongDecoder(*sizes, input_feeding=config.input_feeding)
        else:  # bahdanau, hard, none: the previous state queries (or no attention at all)
            self.decoder = BahdanauDecoder(*sizes)

    def encode(self, src: torch.Tensor, src_lengths: torch.Tensor) -> tuple[Memory, DecoderState]:
        """src (B, S), src_lengths (B,) -> encoder memory and the decoder's first state."""
        enc_outputs, backward_final = self.encoder(src, src_lengths)
        positions = torch.arange(src.size(1), device=src.device)
        mask = positions.unsqueeze(0) < src_lengths.to(src.device).unsqueeze(1)  # (B, S)
        keys = self.decoder.attention.precompute_keys(enc_outputs, mask)
        state = self.decoder.init_state(torch.tanh(self.bridge(backward_final)))  # hidden (B, decoder_hidden)
        return Memory(enc_outputs, keys, mask), state

    def decode_step(
        self, prev_tokens: torch.Tensor, state: DecoderState, memory: Memory
    ) -> tuple[torch.Tensor, DecoderState, torch.Tensor]:
        """prev_tokens (B,) -> logits (B, V) of the next token (float32), new state, attention (B, S).

        Search normalises only what it keeps: log p = logit - logsumexp(logits)."""
        logits, state, weights = self.decoder.step(prev_tokens, state, memory)
        return logits.float(), state, weights

    def forward(
        self, src: torch.Tensor, src_lengths: torch.Tensor, tgt_in: torch.Tensor, teacher_forcing: float = 1.0
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Teacher-forced pass: logits (B, T, V) and attention weights (B, T, S)."""
        memory, state = self.encode(src, src_lengths)
        return self.decoder(tgt_in, state, memory, teacher_forcing)


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
