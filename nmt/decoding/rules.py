"""The rules search holds every hypothesis to, whatever the strategy or the engine: how ended
hypotheses rank (length normalisation and the coverage penalty), how long each sentence's output
may grow, and which spans may not repeat back to back (``decode.no_repeat_span``)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from nmt.config.schema import DecodeConfig


@dataclass(frozen=True)
class Ranking:
    """How search ranks ended hypotheses: log p / lp(length) + cp (Wu et al., 2016, eq. 14).

    lp is length^α (``power``) or ((5 + length) / 6)^α (``gnmt``); cp = β Σ_i log min(Σ_j a_ij, 1)
    sums, over the real source positions i, the log of the attention each received over all
    target steps j (capped at 1), so leaving source words unattended costs score.
    """

    length_penalty: float = 1.0  # α
    length_form: str = "power"
    coverage_penalty: float = 0.0  # β

    @classmethod
    def of(cls, decode: DecodeConfig) -> Ranking:
        """The ranking a config's decoding settings ask for (the one way to make one from them)."""
        return cls(decode.length_penalty, decode.length_form, decode.coverage_penalty)

    def length_norm(self, length: int) -> float:
        if self.length_form == "gnmt":
            return ((5 + length) / 6) ** self.length_penalty
        return max(1, length) ** self.length_penalty

    def coverage(self, attention_sums: torch.Tensor) -> float:
        """cp of one hypothesis: attention_sums (source length,) = its attention summed over steps."""
        return self.coverage_penalty * coverage_logs(attention_sums).item()

    def score(self, log_prob: float, length: int, penalty: float = 0.0) -> float:
        """The ranking score, given the hypothesis's coverage penalty (beam search computes
        them for all rows at once on the device: ``_Beams.coverage_logs``)."""
        return log_prob / self.length_norm(length) + penalty


def coverage_logs(sums: torch.Tensor, padding: torch.Tensor | None = None) -> torch.Tensor:
    """Σ_i log min(Σ_j a_ij, 1) over the last dimension of ``sums`` (attention summed over the
    steps), floored at 1e-6; positions where ``padding`` is True add nothing. cp over β."""
    capped = sums.clamp(min=1e-6, max=1.0)
    return (capped if padding is None else capped.masked_fill(padding, 1.0)).log().sum(-1)


def block_repeats(logits: torch.Tensor, history: torch.Tensor, max_span: int) -> None:
    """Forbid, in place, every token that would repeat a span of up to ``max_span`` tokens back
    to back: logits (R, V), history (R, t) the tokens so far of each row.

    Appending y to h repeats its last span of length l when h[t+1-2l : t-l] == h[t+1-l : t]
    (the span's first l - 1 tokens already repeat) and y == h[t-l]; for l = 1 that is y == h[t-1].
    """
    steps = history.size(1)
    for span in range(1, max_span + 1):
        if 2 * span - 1 > steps:
            break
        first, second = history[:, steps + 1 - 2 * span : steps - span], history[:, steps + 1 - span :]
        repeats = (first == second).all(dim=1, keepdim=True)  # (R, 1); for span 1 both are empty: every row
        # -inf added at the token that would repeat, 0 elsewhere: a mask, not a row list (no host sync)
        blocked = torch.zeros_like(logits[:, :1]).masked_fill(repeats, float("-inf"))
        logits.scatter_add_(1, history[:, steps - span].unsqueeze(1), blocked)


def repeats_a_span(tokens: list[int], max_span: int) -> bool:
    """Whether ``tokens`` hold a span of up to ``max_span`` tokens repeated back to back: what
    ``block_repeats`` keeps a search from writing, checked on a finished output."""
    for end in range(1, len(tokens) + 1):  # the span ending just before ``end`` and the one before it
        for span in range(1, min(max_span, end // 2) + 1):
            if tokens[end - span : end] == tokens[end - 2 * span : end - span]:
                return True
    return False


def max_output_lengths(src_lengths: list[int], ratio: float, offset: int) -> list[int]:
    """Each sentence's own output limit (subwords, <eos> included): a sentence is cut the same
    way whichever sentences share its batch (in ``nmt serve``, other people's)."""
    return [max(1, int(length * ratio) + offset) for length in src_lengths]


def sentence_limits(max_len: int | list[int], batch: int) -> list[int]:
    """Each sentence's output limit: one for all (an int), or one each."""
    return [max_len] * batch if isinstance(max_len, int) else list(max_len)
