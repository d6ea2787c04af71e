"""GRU step math on precomputed input gates.

In teacher-forced decoding the embedding part of a GRU's input is known for every step
before the loop starts, so W_ie · E y_{t-1} is computed for all steps in one matrix
product; each step then adds only the part that depends on the previous step (the
context, or the fed-back attentional vector). Same parameters and gate order (r, z, n)
as ``torch.nn.GRUCell`` / ``torch.nn.GRU``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def gru_step(input_gates: torch.Tensor, hidden: torch.Tensor, weight_hh: torch.Tensor, bias_hh: torch.Tensor) -> torch.Tensor:
    """input_gates (B, 3H) = W_ih x + b_ih; hidden (B, H) -> next hidden (B, H)."""
    hidden_gates = torch.addmm(bias_hh, hidden, weight_hh.t())  # (B, 3H)
    in_r, in_z, in_n = input_gates.chunk(3, dim=-1)
    hid_r, hid_z, hid_n = hidden_gates.chunk(3, dim=-1)
    reset = (in_r + hid_r).sigmoid_()  # in place on fresh sums: fewer tensors written per step
    update = (in_z + hid_z).sigmoid_()
    candidate = torch.addcmul(in_n, reset, hid_n).tanh_()
    return torch.lerp(candidate, hidden, update)  # (1 - z) * n + z * h


def split_input_gates(
    embedded: torch.Tensor, weight_ih: torch.Tensor, bias_ih: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """GRU input = [embedded; other]: returns (W_ie · embedded + b_ih for every step (B, T, 3H),
    W_io, the weights to apply to ``other`` inside the loop)."""
    embed_dim = embedded.size(-1)
    return F.linear(embedded, weight_ih[:, :embed_dim], bias_ih), weight_ih[:, embed_dim:]
