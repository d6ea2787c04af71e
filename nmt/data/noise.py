"""Noise on a sentence's words, for the sources of synthetic pairs.

Self-training pays when the student sees its teacher's pairs with noisy inputs (He et al.,
2020): the student then has to learn more than the teacher's function, and a teacher's mistake
is not taught as a sure thing. The noise is Lample et al.'s (2018): each word dropped with a
probability, the rest shuffled locally (a word moves at most ``SHUFFLE_WITHIN - 1`` places).
It is drawn once, when the data is prepared (seeded: the same config prepares the same text).
"""

from __future__ import annotations

import random

SHUFFLE_WITHIN = 3  # Lample et al.'s k


def noisy_words(text: str, p: float, rng: random.Random) -> str:
    """``text`` with each word dropped with probability ``p`` (one is always kept) and the rest
    shuffled within ``SHUFFLE_WITHIN`` places; ``p == 0`` returns it unchanged."""
    words = text.split()
    if p <= 0.0 or not words:
        return text
    kept = [word for word in words if rng.random() >= p] or [rng.choice(words)]
    # each kept word's position plus a uniform draw in [0, k): sorted, no word passes k - 1 others
    keys = [position + rng.uniform(0, SHUFFLE_WITHIN) for position in range(len(kept))]
    return " ".join(word for _, word in sorted(zip(keys, kept)))
