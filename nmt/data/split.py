"""Deterministic train/dev/test split grouped by source sentence.

All pairs that share a source sentence land in the same split, so no English sentence is
seen in training and then scored in test. Dev and test are also kept as multi-reference
sets: one source with every target it has.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from nmt.data.pairs import Pair
from nmt.errors import NmtError


@dataclass
class Splits:
    train: list[Pair]
    dev: list[Pair]
    test: list[Pair]


def _count(size: float, total: int, cap: int = 0) -> int:
    """``size`` < 1 is a fraction of ``total``, at most ``cap`` (0: no cap); otherwise an
    absolute count; 0 for a set that was given."""
    if size == 0:
        return 0
    if size >= 1:
        return int(size)
    count = max(1, round(size * total))
    return min(count, cap) if cap else count


def split_by_source(pairs: list[Pair], dev_size: float, test_size: float, seed: int, cap: int = 0) -> Splits:
    """Shuffle distinct source sentences with ``seed``; the first go to test, then dev. A size of
    0 carves nothing (that set is given as files); a fractional size carves at most ``cap``
    sources (``data.max_carved``: 5 % of a million sentences would be a dev set validation
    takes minutes to decode)."""
    sources = sorted({pair.src for pair in pairs})
    n_test, n_dev = _count(test_size, len(sources), cap), _count(dev_size, len(sources), cap)
    if n_test + n_dev >= len(sources):
        raise NmtError(
            f"Split sizes too large: {n_dev} dev + {n_test} test source sentences leave no training data "
            f"out of {len(sources)} distinct source sentences (data.dev_size={dev_size}, data.test_size={test_size})."
        )
    random.Random(seed).shuffle(sources)
    split_of = dict.fromkeys(sources[:n_test], "test")
    split_of.update(dict.fromkeys(sources[n_test : n_test + n_dev], "dev"))
    splits = Splits([], [], [])
    for pair in pairs:
        getattr(splits, split_of.get(pair.src, "train")).append(pair)
    return splits


def group_references(pairs: list[Pair]) -> list[tuple[str, list[str]]]:
    """[(source, [every target of that source])] in first-seen order."""
    grouped: dict[str, list[str]] = {}
    for pair in pairs:
        grouped.setdefault(pair.src, []).append(pair.tgt)
    return list(grouped.items())
