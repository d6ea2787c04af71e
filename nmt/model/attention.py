"""Attention mechanisms behind one interface.

Every mechanism is an ``Attention``: ``precompute_keys(enc_outputs)`` once per batch, then
``forward(query, keys, values, mask) -> (context, weights)`` once per decoder step. The
decoder never knows which mechanism it holds. ``mask`` is True at real source positions;
padded positions get exactly zero weight.
"""

from __future__ import annotations

import torch
from torch import nn

from nmt.errors import NmtError


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dim with ``mask == False`` positions forced to exactly 0."""
    scores = scores.masked_fill(~mask, float("-inf"))
    # Half-precision scores are normalised in float32; float32/float64 keep their precision.
    dtype = torch.promote_types(scores.dtype, torch.float32)
    return torch.softmax(scores, dim=-1, dtype=dtype).to(scores.dtype)


class Attention(nn.Module):
    """Interface: score a decoder query against encoder states."""

    def precompute_keys(self, enc_outputs: torch.Tensor) -> torch.Tensor:
        """(B, S, enc_dim) -> keys in whatever form ``forward`` wants, computed once per batch."""
        raise NotImplementedError

    def forward(
        self, query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """query (B, query_dim), keys from ``precompute_keys``, values (B, S, enc_dim),
        mask (B, S) bool -> context (B, enc_dim), weights (B, S)."""
        raise NotImplementedError


class BahdanauAttention(Attention):
    """Additive attention (Bahdanau et al., 2015, eq. 6 / appendix A.1.2):

    e_tj = vᵀ tanh(W s_{t-1} + U h_j),  α_tj = softmax_j(e_tj),  c_t = Σ_j α_tj h_j.
    ``U h_j`` does not depend on t, so it is computed once per batch as the keys.
    """

    def __init__(self, query_dim: int, enc_dim: int, attention_dim: int):
        super().__init__()
        self.query_proj = nn.Linear(query_dim, attention_dim, bias=False)  # W
        self.key_proj = nn.Linear(enc_dim, attention_dim, bias=True)  # U (bias folded in here)
        self.energy = nn.Linear(attention_dim, 1, bias=False)  # v

    def precompute_keys(self, enc_outputs: torch.Tensor) -> torch.Tensor:
        return self.key_proj(enc_outputs)  # (B, S, A)

    def forward(self, query, keys, values, mask):
        hidden = torch.tanh(keys + self.query_proj(query).unsqueeze(1))  # (B, S, A)
        scores = self.energy(hidden).squeeze(-1)  # (B, S)
        weights = masked_softmax(scores, mask)  # (B, S)
        context = torch.bmm(weights.unsqueeze(1), values).squeeze(1)  # (B, enc_dim)
        return context, weights


ATTENTIONS = ("bahdanau",)


def build_attention(name: str, query_dim: int, enc_dim: int, attention_dim: int) -> Attention:
    if name == "bahdanau":
        return BahdanauAttention(query_dim, enc_dim, attention_dim)
    raise NmtError(f"Unknown attention {name!r}; allowed: {', '.join(ATTENTIONS)}.")
