"""A competence curriculum: short pairs first (Platanios et al., 2019, "Competence-based
curriculum learning for neural machine translation").

A pair's difficulty ``d`` is the share of training pairs no longer than it (its length's
cumulative distribution: the longer side, in subwords). The model's competence grows with
training over the curriculum's first ``span`` epochs as the paper's square-root schedule,

    c(p) = min(1, sqrt(p / span * (1 - c0**2) + c0**2)),   p = epochs trained,

and a pair is admissible once ``c(p) >= d``, that is from ``p = span * (d**2 - c0**2) / (1 - c0**2)``.

Where the paper samples each batch from the admissible pairs (with replacement), here every
epoch still trains every pair exactly once, so that an epoch, its resume and its metrics mean
what they mean without a curriculum: each place of the epoch takes a random pair among the
admissible ones not yet visited. Early batches hold only short pairs; the long ones gather
towards the end of the curriculum. Epochs after ``span`` are shuffled as without it.
"""

from __future__ import annotations

import numpy as np

INITIAL_COMPETENCE = 0.01  # c0: the paper's value, the share of pairs admissible at the start


def difficulty(lengths: np.ndarray) -> np.ndarray:
    """Each pair's difficulty in (0, 1]: the share of pairs with a length at most its own."""
    ordered = np.sort(lengths)
    return np.searchsorted(ordered, lengths, side="right") / len(lengths)


def admissible_from(lengths: np.ndarray, span: float) -> np.ndarray:
    """The number of epochs trained (a float) after which each pair is admissible."""
    c0 = INITIAL_COMPETENCE
    return span * np.clip((difficulty(lengths) ** 2 - c0**2) / (1 - c0**2), 0.0, 1.0)


def curriculum_order(lengths: list[int], span: float, epoch: int, seed: int) -> list[int] | None:
    """The order in which epoch ``epoch`` (from 1) visits its pairs under a curriculum of
    ``span`` epochs; None once the curriculum is over (the epoch is shuffled as usual).
    Deterministic for a given ``seed``.

    Each place of the epoch takes a random pair among those admissible there and not yet
    visited; when there is none (at the very start, or at the end of an epoch that ends before
    the curriculum), the pair admissible soonest."""
    if span <= 0 or epoch - 1 >= span or not lengths:
        return None
    count = len(lengths)
    # (N,) where each pair becomes admissible, as a share of this epoch: 0 = its start, 1 = after it
    release = np.clip(admissible_from(np.asarray(lengths), span) - (epoch - 1), 0.0, 1.0)
    rng = np.random.default_rng(seed)
    by_release = np.lexsort((rng.random(count), release)).tolist()  # soonest first, ties at random
    picks = rng.random(count).tolist()
    waiting: list[int] = []
    order: list[int] = []
    admitted = 0
    for place in range(count):
        while admitted < count and (release[by_release[admitted]] <= place / count or not waiting):
            waiting.append(by_release[admitted])
            admitted += 1
        chosen = int(picks[place] * len(waiting))
        waiting[chosen], waiting[-1] = waiting[-1], waiting[chosen]  # swap-remove: O(1)
        order.append(waiting.pop())
    return order
