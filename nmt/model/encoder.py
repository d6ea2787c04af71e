"""Bidirectional GRU encoder over packed sequences (Bahdanau et al., 2015, section 3.2)."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from nmt.model.dropout import Dropout
from nmt.tokenizer import PAD_ID


class Encoder(nn.Module):
    """Embeddings -> dropout -> BiGRU. Outputs h_j = [→h_j; ←h_j] for every source position."""

    def __init__(self, vocab_size: int, embed_dim: int, hidden: int, num_layers: int, dropout: float):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=PAD_ID)
        self.dropout = Dropout(dropout)
        self.rnn = nn.GRU(
            embed_dim,
            hidden,
            num_layers=num_layers,
            batch_first=True,
            bidirectional=True,
            dropout=dropout if num_layers > 1 else 0.0,
        )
        self.output_dim = 2 * hidden

    def forward(self, src: torch.Tensor, src_lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """src (B, S), src_lengths (B,) on CPU -> enc_outputs (B, S, 2H) (zeros at padding),
        backward_final (B, H): the backward RNN's state at position 1 of the top layer."""
        embedded = self.dropout(self.embedding(src))  # (B, S, E)
        packed = pack_padded_sequence(embedded, src_lengths.cpu(), batch_first=True, enforce_sorted=False)
        packed_out, final = self.rnn(packed)  # final: (layers * 2, B, H)
        enc_outputs, _ = pad_packed_sequence(packed_out, batch_first=True, total_length=src.size(1))
        return enc_outputs, final[-1]
