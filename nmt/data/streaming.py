"""The passes ``nmt prepare`` makes over a training corpus of any size, holding no list of
its sentences (the rules are those of ``drop_duplicates`` and ``split_by_source``; a test
checks that both ways give the same files):

1. ``survey``: read every pair once: counts and problems, a digest per pair (8 bytes), the
   distinct sources sorted on disk.
2. ``carve``: which sources go to dev and test (the split rule applied to the sorted sources).
3. ``distribute``: read again, keep the first of each repeated pair, write each pair to its
   split's text files as it comes, and keep what the rest of prepare needs: a seeded sample of
   training pairs for SentencePiece, the characters seen, the carved sets (small) for their
   references, the counts.
"""

from __future__ import annotations

import random
from array import array
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from tqdm import tqdm

from nmt.config.paths import PreparedPaths
from nmt.config.schema import DataConfig
from nmt.core.fileio import atomic_text_writer
from nmt.data.distinct import DistinctSorted, FirstOccurrence, pair_digest, repeated_digests
from nmt.data.pairs import Pair, ReadResult
from nmt.data.sources import Corpus
from nmt.data.split import carved_ranks, group_references

BAR_EVERY = 4096  # pairs between progress-bar updates


@dataclass
class Survey:
    result: ReadResult  # lines, problems, clipped sentences
    repeated: set[int]  # digests of pairs that occur more than once
    sources: DistinctSorted  # the distinct sources, sorted on disk
    n_sources: int
    distinct_pairs: int  # the pairs kept once repeats are dropped


def survey(corpus: Corpus, scratch: Path, result: ReadResult, bar: tqdm) -> Survey:
    """Pass 1: count, check and fingerprint every training pair."""
    digests = array("Q")
    sources = DistinctSorted(scratch)
    for pair in _counted(corpus.train_pairs(result), result, bar):
        digests.append(pair_digest(pair.src, pair.tgt))
        sources.add(pair.src)
    repeated, distinct = repeated_digests(digests)
    return Survey(result, repeated, sources, sources.finish(), distinct)


def carve(found: Survey, data: DataConfig, carved: list[str]) -> dict[str, str]:
    """{source: "dev" | "test"} for the sets carved out of training (``carved``: their names)."""
    dev_size = data.dev_size if "dev" in carved else 0
    test_size = data.test_size if "test" in carved else 0
    ranks = carved_ranks(found.n_sources, dev_size, test_size, data.split_seed, data.max_carved)
    return found.sources.pick(ranks)


class Reservoir:
    """A seeded uniform sample of ``size`` items of a stream, in stream order (all of them, in
    order, when the stream is no longer)."""

    def __init__(self, size: int, seed: int):
        self.size, self.rng = size, random.Random(seed)
        self.items: list[tuple[int, object]] = []
        self.offered = 0

    def offer(self, item) -> None:
        if len(self.items) < self.size:
            self.items.append((self.offered, item))
        else:
            slot = self.rng.randrange(self.offered + 1)
            if slot < self.size:
                self.items[slot] = (self.offered, item)
        self.offered += 1

    def in_order(self) -> list:
        return [item for _, item in sorted(self.items, key=lambda entry: entry[0])]


@dataclass
class Distribution:
    split_pairs: dict[str, int]  # pairs per split
    duplicates_dropped: int
    sample: list[Pair]  # the training pairs SentencePiece learns from
    characters: set[str]  # every character of the training pairs
    carved: dict[str, list[Pair]] = field(default_factory=dict)  # "dev" / "test" pairs carved out
    given_seen: dict[str, int] = field(default_factory=dict)  # given set -> its sources seen in training


def distribute(
    corpus: Corpus,
    found: Survey,
    split_of: dict[str, str],
    carved_sets: list[str],
    paths: PreparedPaths,
    sample_size: int,
    bar: tqdm,
) -> Distribution:
    """Pass 2: write the training pairs and the carved sets' (``carved_sets``) pairs to their
    text files."""
    keep = FirstOccurrence(found.repeated)
    sample = Reservoir(sample_size, corpus.data.split_seed)
    characters: set[str] = set()
    given_sources = {split: {src for src, _ in given.rows} for split, given in corpus.given.items()}
    seen_in_train: dict[str, set[str]] = {split: set() for split in corpus.given}
    carved: dict[str, list[Pair]] = {split: [] for split in carved_sets}
    counts = {"train": 0, **dict.fromkeys(carved_sets, 0)}
    again = ReadResult(keep_problems=0)  # counted in the survey already
    with ExitStack() as stack:
        files = {split: _split_writers(stack, paths, split) for split in counts}
        for pair in _counted(corpus.train_pairs(again), again, bar):
            if not keep.keep(pair_digest(pair.src, pair.tgt)):
                continue
            split = split_of.get(pair.src, "train")
            for handle, text in zip(files[split], (pair.src, pair.tgt, pair.attribution)):
                handle.write(text + "\n")
            counts[split] += 1
            if split != "train":
                carved[split].append(pair)
                continue
            sample.offer(pair)
            characters.update(pair.src)
            characters.update(pair.tgt)
            for given, sources in given_sources.items():
                if pair.src in sources:
                    seen_in_train[given].add(pair.src)
    return Distribution(
        counts,
        keep.dropped,
        sample.in_order(),
        characters,
        carved,
        {split: len(seen) for split, seen in seen_in_train.items()},
    )


def carved_references(distribution: Distribution) -> dict[str, list[tuple[str, list[str]]]]:
    return {split: group_references(pairs) for split, pairs in distribution.carved.items()}


def _split_writers(stack: ExitStack, paths: PreparedPaths, split: str) -> list:
    """The source, target and attribution files of ``split``, each appearing only when complete."""
    names = (paths.text(split, "src"), paths.text(split, "tgt"), paths.attribution(split))
    return [stack.enter_context(atomic_text_writer(name)) for name in names]


def _counted(pairs: Iterator[Pair], result: ReadResult, bar: tqdm) -> Iterator[Pair]:
    """``pairs``, moving ``bar`` to the lines ``result`` has counted every few thousand pairs."""
    for index, pair in enumerate(pairs):
        if index % BAR_EVERY == 0:
            bar.update(result.lines_read - bar.n)
        yield pair
    bar.update(result.lines_read - bar.n)
