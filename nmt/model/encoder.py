"""Bidirectional GRU encoder (Bahdanau et al., 2015, section 3.2), over packed or padded input.

Two ways to run the same weights, with the same outputs:

* ``packed``: ``pack_padded_sequence`` -> one bidirectional ``nn.GRU`` call -> unpack. Each
  direction sees only the real tokens of every sentence.
* ``padded``: each direction runs over the whole padded batch as its own call. The
  backward direction reads every sentence reversed *within its length* (padding stays at
  the end), so it too starts at the sentence's last real token; outputs at padding are
  set to zero. No packing, and cuDNN may use its persistent kernels, which it never uses
  with a ``PackedSequence``.

Which is faster depends on the device; docs/benchmarks.md has the measurements (on the
CPU a full training step is as fast either way, so ``packed``, the default, stays).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from nmt.model.dropout import Dropout
from nmt.tokenizer import PAD_ID


def reverse_within_lengths(lengths: torch.Tensor, width: int) -> torch.Tensor:
    """(B, width) gather index that reverses each row's first ``lengths[b]`` positions and
    leaves the padding where it is. Its own inverse."""
    positions = torch.arange(width, device=lengths.device).unsqueeze(0)  # (1, S)
    last = lengths.unsqueeze(1) - 1  # (B, 1)
    return torch.where(positions <= last, last - positions, positions)  # (B, S)


class Encoder(nn.Module):
    """Embeddings -> dropout -> BiGRU. Outputs h_j = [→h_j; ←h_j] for every source position."""

    def __init__(self, vocab_size: int, embed_dim: int, hidden: int, num_layers: int, dropout: float,
                 rnn_input: str = "packed"):  # fmt: skip
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
        self.rnn_input = rnn_input  # packed | padded: how the BiGRU is run, not what it computes

    def forward(self, src: torch.Tensor, src_lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """src (B, S), src_lengths (B,) on CPU -> enc_outputs (B, S, 2H) (zeros at padding),
        backward_final (B, H): the backward RNN's state at position 1 of the top layer."""
        embedded = self.dropout(self.embedding(src))  # (B, S, E)
        if self.rnn_input == "padded":
            return self._run_padded(embedded, src_lengths.to(src.device))
        packed = pack_padded_sequence(embedded, src_lengths.cpu(), batch_first=True, enforce_sorted=False)
        packed_out, final = self.rnn(packed)  # final: (layers * 2, B, H)
        enc_outputs, _ = pad_packed_sequence(packed_out, batch_first=True, total_length=src.size(1))
        return enc_outputs, final[-1]

    def _run_padded(self, embedded: torch.Tensor, src_lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        batch, width, _ = embedded.shape
        hidden_size = self.rnn.hidden_size
        reverse = reverse_within_lengths(src_lengths, width).unsqueeze(-1)  # (B, S, 1)
        mask = (torch.arange(width, device=embedded.device).unsqueeze(0) < src_lengths.unsqueeze(1)).unsqueeze(-1)
        initial = embedded.new_zeros(1, batch, hidden_size)
        layer_input = embedded
        for layer in range(self.rnn.num_layers):
            if layer > 0:  # nn.GRU's dropout between layers
                layer_input = F.dropout(layer_input, self.rnn.dropout, self.training)
            forward_out = self._direction(layer_input, initial, layer, "")  # (B, S, H)
            reversed_input = layer_input.gather(1, reverse.expand_as(layer_input))
            backward_out = self._direction(reversed_input, initial, layer, "_reverse")
            backward_out = backward_out.gather(1, reverse.expand_as(backward_out))  # back to source order
            layer_input = torch.cat([forward_out, backward_out], dim=-1) * mask  # (B, S, 2H), zeros at padding
        return layer_input, layer_input[:, 0, hidden_size:]  # ←h_1 is the backward output at position 1

    def _direction(self, inputs: torch.Tensor, initial: torch.Tensor, layer: int, suffix: str) -> torch.Tensor:
        """One direction of one layer of ``self.rnn`` over (B, S, in) -> outputs (B, S, H)."""
        rnn = self.rnn
        weights = [getattr(rnn, f"{name}_l{layer}{suffix}") for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
        outputs, _ = torch.gru(inputs, initial, weights, True, 1, 0.0, self.training, False, True)
        return outputs
