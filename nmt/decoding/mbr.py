"""Minimum Bayes risk decoding: of a sentence's n-best translations, the one the others agree
with most (Kumar & Byrne, 2004; Eikema & Aziz, 2020; Freitag et al., 2022).

Beam search returns the translation the model finds most probable; MBR returns the one with the
highest *expected utility* against the model's distribution, estimated over the n-best itself:

    pick = argmax_i  sum_j  p_j * u(c_i, c_j),     p = softmax of the candidates' log-probabilities

with u a sentence-level chrF or BLEU (sacrebleu's). A candidate close to many probable ones
wins over an outlier the model happens to score highest. Plain Python over text: it runs after
search, once per sentence, and costs n^2 utility calls (64 at ``decode.mbr: 8``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from sacrebleu.metrics import BLEU, CHRF

UTILITIES = ("chrf", "bleu")


def utility_function(name: str) -> Callable[[str, str], float]:
    """u(candidate, pseudo-reference) in [0, 100]."""
    if name == "chrf":
        chrf = CHRF()
        return lambda hypothesis, reference: chrf.sentence_score(hypothesis, [reference]).score
    if name == "bleu":
        bleu = BLEU(effective_order=True)  # short sentences have no 4-grams: sentence BLEU needs it
        return lambda hypothesis, reference: bleu.sentence_score(hypothesis, [reference]).score
    raise ValueError(f"unknown MBR utility {name!r} (one of {', '.join(UTILITIES)})")


def expected_utilities(
    candidates: list[str], log_probs: list[float], utility: Callable[[str, str], float]
) -> list[float]:
    """Each candidate's expected utility against the others, weighted by their probabilities
    (renormalised over the list; every candidate counts itself too, as the sum over the
    model's distribution does)."""
    top = max(log_probs)
    weights = [math.exp(lp - top) for lp in log_probs]
    total = sum(weights)
    weights = [w / total for w in weights]
    return [sum(w * utility(candidate, other) for other, w in zip(candidates, weights)) for candidate in candidates]


def mbr_choice(candidates: list[str], log_probs: list[float], utility: Callable[[str, str], float]) -> int:
    """The index of the candidate with the highest expected utility (the first on a tie, so
    the search's own order decides between equals)."""
    if len(candidates) == 1:
        return 0
    expected = expected_utilities(candidates, log_probs, utility)
    return max(range(len(candidates)), key=lambda i: (expected[i], -i))
