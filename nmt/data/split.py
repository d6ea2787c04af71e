"""Deterministic train/dev/test split grouped by source sentence.

All pairs that share a source sentence land in the same split, so no English sentence is
seen in training and then scored in test. Dev and test are also kept as multi-reference
sets: one source with every target it has.
"""

from __future__ import annotations

import random
from array import array
from dataclasses import dataclass

from nmt.core.errors import NmtError
from nmt.data.pairs import Pair


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


def check_enough_sources(n_sources: int, pairs: int, carved: list[str], what: str) -> None:
    """Refuse data too small to carve ``carved`` (dev, test) out of and train on the rest."""
    if carved and n_sources < 1 + len(carved):
        raise NmtError(
            f"{what} holds {pairs} usable pair(s) of {n_sources} distinct source sentence(s): too few to split "
            f"into train, {' and '.join(carved)} (each source sentence stays in one split)."
        )


def carved_ranks(n_sources: int, dev_size: float, test_size: float, seed: int, cap: int = 0) -> dict[int, str]:
    """The split rule: shuffle the ranks of ``n_sources`` distinct source sentences (in sorted
    order) with ``seed``; the first go to test, then dev. Returns {rank: "test" | "dev"}.

    A size of 0 carves nothing (that set is given as files); a fractional size carves at most
    ``cap`` sources (``data.max_carved``: 5 % of a million sentences would be a dev set
    validation takes minutes to decode)."""
    n_test, n_dev = _count(test_size, n_sources, cap), _count(dev_size, n_sources, cap)
    if n_test + n_dev >= n_sources:
        raise NmtError(
            f"Split sizes too large: {n_dev} dev + {n_test} test source sentences leave no training data "
            f"out of {n_sources} distinct source sentences (data.dev_size={dev_size}, data.test_size={test_size})."
        )
    order = array("q", range(n_sources))  # 8 bytes a source: what shuffling a list of them draws, exactly
    random.Random(seed).shuffle(order)
    carved = dict.fromkeys(order[:n_test], "test")
    carved.update(dict.fromkeys(order[n_test : n_test + n_dev], "dev"))
    return carved


def split_by_source(pairs: list[Pair], dev_size: float, test_size: float, seed: int, cap: int = 0) -> Splits:
    """``carved_ranks`` applied to pairs in memory (``nmt.data.streaming`` applies it to a
    corpus of any size)."""
    sources = sorted({pair.src for pair in pairs})
    split_of = {
        sources[rank]: split for rank, split in carved_ranks(len(sources), dev_size, test_size, seed, cap).items()
    }
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
