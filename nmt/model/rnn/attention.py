"""Attention mechanisms behind one interface.

Every mechanism is an ``Attention``:

    keys = attention.precompute_keys(enc_outputs, mask)          # once per batch
    context, weights = attention(query, keys, values, mask, steps)

with ``query`` (B, T, query_dim) — T = 1 for one decoder step, T = all target positions for
the parallel fast path — ``values`` (B, S, enc_dim), ``mask`` (B, S) True at real source
positions, ``steps`` (T,) the decoder step index of each query, or an int when T = 1
(used by local windows).
Returns context (B, T, enc_dim) and weights (B, T, S). Padded positions, and positions
outside a local window, get exactly zero weight. The decoder never knows which mechanism
or window it holds.

Scoring functions (``score(query, keys) -> (B, T, S)``):
  additive  vᵀ tanh(W q + U h_j)     Bahdanau et al. (2015) eq. 6; Luong et al. (2015) "concat"
  dot       q · h_j                  Luong "dot"
  general   q · (W_a h_j)            Luong "general"
Normalisations: softmax (soft), straight-through Gumbel-softmax / argmax (hard, after Xu
et al., 2015), or none at all (``FixedSummary``: Cho et al.'s 2014 encoder-decoder, which
reads one summary vector of the source at every step).
Windows (Luong et al. section 3.2): ``global``; ``local-m`` (p_t = t); ``local-p``
(p_t = S·sigmoid(v_pᵀ tanh(W_p q_t)), scores weighted by a Gaussian of σ = D/2), each
restricting attention to [p_t − D, p_t + D].
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

import torch
import torch.nn.functional as F
from torch import nn

from nmt.core.registry import ATTENTIONS


class AttentionSettings(Protocol):
    """What a builder reads from ``model`` in the config (nmt.config.schema.ModelConfig has these)."""

    attention_dim: int
    gumbel_temperature: float


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dim with ``mask == False`` positions forced to exactly 0."""
    scores = scores.masked_fill(~mask, float("-inf"))
    # Half-precision scores are normalised in float32; float32/float64 keep their precision.
    dtype = torch.promote_types(scores.dtype, torch.float32)
    return torch.softmax(scores, dim=-1, dtype=dtype).to(scores.dtype)


class Window(nn.Module):
    """Restricts attention to [p_t - D, p_t + D]; ``local-p`` also adds a Gaussian prior.

    Luong et al. multiply the normalised weights by the Gaussian, so theirs no longer sum
    to 1; here the log-Gaussian is added to the scores before the softmax, which weights
    the same way and keeps a distribution.
    """

    def __init__(self, kind: str, half_width: int, query_dim: int):
        super().__init__()
        self.kind = kind
        self.half_width = half_width
        if kind == "local-p":
            self.position_hidden = nn.Linear(query_dim, query_dim, bias=False)  # W_p
            self.position_out = nn.Linear(query_dim, 1, bias=False)  # v_p

    def centres(self, query: torch.Tensor, lengths: torch.Tensor, steps: torch.Tensor | int) -> torch.Tensor:
        """p_t for every query: (B, T), as a float position in [0, S_b - 1]. ``steps``: (T,),
        or an int for a single step (no tensor to build, no host-to-device copy)."""
        last = (lengths - 1).to(query.dtype).unsqueeze(1)  # (B, 1)
        if self.kind == "local-m":  # p_t = t, clipped to the sentence
            if isinstance(steps, int):
                return last.clamp(max=steps)  # (B, 1)
            return torch.minimum(steps.to(query.dtype).unsqueeze(0), last)  # (B, T)
        gate = torch.sigmoid(self.position_out(torch.tanh(self.position_hidden(query)))).squeeze(-1)  # (B, T)
        return gate * last

    def forward(self, scores, query, mask, steps):
        """scores (B, T, S), mask (B, S) -> (scores, mask (B, T, S)) restricted to the window."""
        lengths = mask.sum(dim=1)  # (B,)
        centres = self.centres(query, lengths, steps).unsqueeze(-1)  # (B, T, 1)
        positions = torch.arange(mask.size(1), device=mask.device, dtype=query.dtype)  # (S,)
        distance = positions - centres  # (B, T, S)
        window_mask = mask.unsqueeze(1) & (distance.abs() <= self.half_width)
        if self.kind == "local-p":
            sigma = self.half_width / 2
            scores = scores - distance.pow(2) / (2 * sigma**2)
        return scores, window_mask


class Attention(nn.Module):
    """Base class: a scoring function, an optional window, a normalisation."""

    def __init__(self, window: Window | None = None):
        super().__init__()
        self.window = window

    def precompute_keys(self, enc_outputs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(B, S, enc_dim) -> what ``score`` compares queries with; computed once per batch."""
        return enc_outputs

    def score(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """query (B, T, query_dim), keys -> scores (B, T, S)."""
        raise NotImplementedError

    def normalize(self, scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """scores (B, T, S), mask broadcastable to it -> weights (B, T, S)."""
        return masked_softmax(scores, mask.expand_as(scores))

    def windowed_scores(self, query, keys, mask, steps) -> tuple[torch.Tensor, torch.Tensor]:
        """What the normalisation reads: scores (B, T, S), with a local-p window's Gaussian
        prior added, and the mask (B, T or 1, S) of the positions it may weight."""
        scores = self.score(query, keys)  # (B, T, S)
        if self.window is None:
            return scores, mask.unsqueeze(1)  # (B, 1, S)
        return self.window(scores, query, mask, steps)

    def forward(self, query, keys, values, mask, steps):
        scores, full_mask = self.windowed_scores(query, keys, mask, steps)
        weights = self.normalize(scores, full_mask)  # (B, T, S)
        context = torch.bmm(weights, values)  # (B, T, enc_dim)
        return context, weights

    @torch.no_grad()
    def explain(self, query, keys, values, mask, steps) -> dict[str, torch.Tensor]:
        """``forward``'s intermediate values for the same inputs (the attention lab shows
        them): ``energies`` (B, T, S) as the score function gives them, ``scores`` what the
        normalisation reads (-inf where masked or outside a window), ``weights``, ``context``
        and, with a local window, its ``centres`` (B, T)."""
        scores, full_mask = self.windowed_scores(query, keys, mask, steps)
        weights = self.normalize(scores, full_mask)
        parts = {
            "energies": self.score(query, keys),
            "scores": scores.masked_fill(~full_mask.expand_as(scores), float("-inf")),
            "weights": weights,
            "context": torch.bmm(weights, values),
        }
        if self.window is not None:
            parts["centres"] = self.window.centres(query, mask.sum(dim=1), steps).expand(query.shape[:2])
        return parts


class AdditiveAttention(Attention):
    """e_tj = vᵀ tanh(W q_t + U h_j) (Bahdanau's alignment model; Luong's "concat").
    ``U h_j`` is the precomputed key."""

    def __init__(self, query_dim: int, enc_dim: int, attention_dim: int, window: Window | None = None):
        super().__init__(window)
        self.query_proj = nn.Linear(query_dim, attention_dim, bias=False)  # W
        self.key_proj = nn.Linear(enc_dim, attention_dim, bias=True)  # U (the bias folded in here)
        self.energy = nn.Linear(attention_dim, 1, bias=False)  # v

    def precompute_keys(self, enc_outputs, mask):
        return self.key_proj(enc_outputs)  # (B, S, A)

    def score(self, query, keys):
        hidden = torch.tanh(keys.unsqueeze(1) + self.query_proj(query).unsqueeze(2))  # (B, T, S, A)
        return self.energy(hidden).squeeze(-1)  # (B, T, S)


class DotAttention(Attention):
    """Luong "dot": e_tj = q_t · h_j (query and encoder states of equal width)."""

    def score(self, query, keys):
        return torch.bmm(query, keys.transpose(1, 2))  # (B, T, S)


class GeneralAttention(DotAttention):
    """Luong "general": e_tj = q_t · (W_a h_j); W_a h_j is the precomputed key."""

    def __init__(self, query_dim: int, enc_dim: int, window: Window | None = None):
        super().__init__(window)
        self.key_proj = nn.Linear(enc_dim, query_dim, bias=False)  # W_a

    def precompute_keys(self, enc_outputs, mask):
        return self.key_proj(enc_outputs)  # (B, S, query_dim)


class HardAttention(AdditiveAttention):
    """Hard attention in the spirit of Xu et al. (2015): one source position per step.

    Training: straight-through Gumbel-softmax (a one-hot sample forward, the soft
    distribution's gradient backward). Inference (``eval()``): the argmax, one-hot.
    """

    def __init__(self, query_dim, enc_dim, attention_dim, window=None, temperature: float = 1.0):
        super().__init__(query_dim, enc_dim, attention_dim, window)
        self.temperature = temperature

    def normalize(self, scores, mask):
        dtype = scores.dtype  # the weights keep it; half-precision scores are sampled in float32
        scores = scores.masked_fill(~mask.expand_as(scores), float("-inf")).to(
            torch.promote_types(dtype, torch.float32)
        )
        if self.training:
            return F.gumbel_softmax(scores, tau=self.temperature, hard=True, dim=-1).to(dtype)
        return F.one_hot(scores.argmax(dim=-1), scores.size(-1)).to(dtype)


class FixedSummary(Attention):
    """No attention (Cho et al., 2014): every step reads the same summary of the source,
    c = [→h_S; ←h_1] (the final states of both directions). Weights are all zero."""

    def precompute_keys(self, enc_outputs, mask):
        half = enc_outputs.size(-1) // 2
        last = (mask.sum(dim=1) - 1).view(-1, 1, 1).expand(-1, 1, half)  # (B, 1, H)
        forward_final = enc_outputs[..., :half].gather(1, last).squeeze(1)  # (B, H)
        backward_final = enc_outputs[:, 0, half:]  # (B, H)
        return torch.cat([forward_final, backward_final], dim=-1)  # (B, enc_dim)

    def forward(self, query, keys, values, mask, steps):
        batch, steps_n = query.shape[:2]
        context = keys.unsqueeze(1).expand(batch, steps_n, keys.size(-1))  # (B, T, enc_dim)
        return context, values.new_zeros(batch, steps_n, values.size(1))

    @torch.no_grad()
    def explain(self, query, keys, values, mask, steps) -> dict[str, torch.Tensor]:
        context, weights = self.forward(query, keys, values, mask, steps)
        return {"weights": weights, "context": context}


@dataclass(frozen=True)
class AttentionKind:
    """One entry of the registry: how to build the mechanism, which decoder order uses it,
    what it can do (the config's checks, the plots and the lab read these, never a name), and
    its equations as the attention lab shows them (q: the query, h_j: encoder states)."""

    build: Callable[
        [AttentionSettings, int, int, Window | None], Attention
    ]  # (model config, query_dim, enc_dim, window)
    # the decoder order: attend with s_{t-1}, then the recurrence (Bahdanau et al.), or the
    # recurrence, then attend with h_t (Luong et al.)
    order: Literal["attend-then-recur", "recur-then-attend"]
    formula: tuple[str, ...] = ()
    has_weights: bool = True  # gives a distribution over source positions (False: nothing to plot)
    takes_window: bool = True  # can be restricted to a local window (model.attention_window)
    needs_equal_widths: bool = False  # compares the query with h_j directly: decoder_hidden = 2 x encoder_hidden
    one_position: bool = False  # attends to exactly one source position per step (hard attention)


# The built-ins, registered in the order the config reference lists them (model.attention's values).
SOFT = ("a_j = exp(e_j) / Σ_k exp(e_k)", "c = Σ_j a_j h_j")
ADDITIVE = "e_j = vᵀ tanh(W q + U h_j)"
BUILT_IN: dict[str, AttentionKind] = {
    "bahdanau": AttentionKind(
        lambda c, q, e, w: AdditiveAttention(q, e, c.attention_dim, w), "attend-then-recur", (ADDITIVE, *SOFT)
    ),
    "luong-dot": AttentionKind(
        lambda c, q, e, w: DotAttention(w), "recur-then-attend", ("e_j = q · h_j", *SOFT), needs_equal_widths=True
    ),
    "luong-general": AttentionKind(
        lambda c, q, e, w: GeneralAttention(q, e, w), "recur-then-attend", ("e_j = q · (W_a h_j)", *SOFT)
    ),
    "luong-concat": AttentionKind(
        lambda c, q, e, w: AdditiveAttention(q, e, c.attention_dim, w), "recur-then-attend", (ADDITIVE, *SOFT)
    ),
    "hard": AttentionKind(
        lambda c, q, e, w: HardAttention(q, e, c.attention_dim, w, c.gumbel_temperature),
        "attend-then-recur",
        (ADDITIVE, "a = one-hot(argmax_j e_j)  (a Gumbel-softmax sample in training)", "c = h_argmax"),
        one_position=True,
    ),
    "none": AttentionKind(
        lambda c, q, e, w: FixedSummary(),
        "attend-then-recur",
        ("c = [→h_S; ←h_1]  (the same summary at every step)",),
        has_weights=False,
        takes_window=False,
    ),
}
for _name, _kind in BUILT_IN.items():
    ATTENTIONS.register(_name, _kind)

# A window's equations, shown after the score's (D: model.window_width).
WINDOW_FORMULAS = {
    "global": (),
    "local-m": ("p_t = t;  a_j = 0 outside [p_t − D, p_t + D]",),
    "local-p": (
        "p_t = S · sigmoid(v_pᵀ tanh(W_p q))",
        "e_j ← e_j − (j − p_t)² / (2σ²),  σ = D / 2;  a_j = 0 outside [p_t − D, p_t + D]",
    ),
}


def build_attention(config, query_dim: int, enc_dim: int) -> Attention:
    """The mechanism ``config.attention`` names (``config``: the model section), restricted to
    ``config.attention_window`` (the config was validated on load, so both names are known)."""
    window = None
    if config.attention_window != "global":
        window = Window(config.attention_window, config.window_width, query_dim)
    return ATTENTIONS[config.attention].build(config, query_dim, enc_dim, window)
