"""Exact duplicates and distinct sentences of a corpus of any size, in bounded memory.

- ``pair_digest``: 8 bytes stand for a pair. ``repeated_digests`` finds the digests seen more
  than once from one array of them (8 bytes a pair, sorted in place), and ``FirstOccurrence``
  keeps the first pair of each on the next pass: the rule of ``nmt.data.pairs.drop_duplicates``
  without a set of strings.
- ``DistinctSorted``: distinct strings in Python's order (code points, which is the byte order
  of their UTF-8), sorted on disk: sorted chunks, merged. What ``split_by_source`` needs of a
  million sources (their count, and the ones at a few ranks) without holding them.
"""

from __future__ import annotations

import hashlib
import heapq
from array import array
from collections.abc import Iterator
from pathlib import Path

import numpy as np


def pair_digest(src: str, tgt: str) -> int:
    """A pair's 64-bit digest. A tab cannot occur inside a normalised side, so it separates
    them unambiguously; two different pairs collide with odds of about n² / 2⁶⁵."""
    return int.from_bytes(hashlib.blake2b(f"{src}\t{tgt}".encode(), digest_size=8).digest(), "little")


def repeated_digests(digests: array) -> tuple[set[int], int]:
    """(the digests that occur more than once in ``digests``, how many distinct ones there are).
    ``digests`` (an ``array("Q")``) is emptied: the sort needs its memory."""
    ordered = np.frombuffer(digests, dtype=np.uint64).copy()
    del digests[:]
    ordered.sort()
    same_as_previous = ordered[1:] == ordered[:-1]
    repeats = np.unique(ordered[1:][same_as_previous])
    return {int(d) for d in repeats}, len(ordered) - int(same_as_previous.sum())


class FirstOccurrence:
    """Keeps the first pair of every repeated digest, and every pair whose digest is unique."""

    def __init__(self, repeated: set[int]):
        self.repeated = repeated
        self.seen: set = set()
        self.dropped = 0

    def keep(self, digest: int) -> bool:
        if digest not in self.repeated:
            return True
        if digest in self.seen:
            self.dropped += 1
            return False
        self.seen.add(digest)
        return True


class DistinctSorted:
    """Distinct strings, sorted on disk in ``folder``: ``add`` them, ``finish`` (their count),
    then ``pick`` the ones at given ranks. Memory: one chunk of ``chunk`` strings."""

    def __init__(self, folder: Path, chunk: int = 200_000):
        self.folder, self.chunk = Path(folder), chunk
        self.pending: set[bytes] = set()
        self.chunks: list[Path] = []
        self.merged = self.folder / "distinct.txt"
        self.count = 0

    def add(self, text: str) -> None:
        self.pending.add(text.encode())
        if len(self.pending) >= self.chunk:
            self._spill()

    def _spill(self) -> None:
        path = self.folder / f"chunk-{len(self.chunks)}.txt"
        with open(path, "wb") as handle:
            handle.writelines(line + b"\n" for line in sorted(self.pending))
        self.chunks.append(path)
        self.pending = set()

    def finish(self) -> int:
        """Merge the chunks into one sorted file of distinct strings; their count."""
        if self.pending or not self.chunks:
            self._spill()
        with open(self.merged, "wb") as out:
            previous = None
            for line in heapq.merge(*(_read(path) for path in self.chunks)):
                if line != previous:
                    out.write(line + b"\n")
                    self.count += 1
                    previous = line
        for path in self.chunks:
            path.unlink()
        return self.count

    def pick(self, ranks: dict[int, str]) -> dict[str, str]:
        """{string at rank r: label} for every ``r: label`` in ``ranks`` (0-based, sorted order)."""
        picked = {}
        with open(self.merged, "rb") as handle:
            for rank, line in enumerate(handle):
                if rank in ranks:
                    picked[line[:-1].decode()] = ranks[rank]
        return picked


def _read(path: Path) -> Iterator[bytes]:
    """A chunk's strings without their line ends (a control character below LF inside a
    string must order it as it does without one)."""
    with open(path, "rb") as handle:
        for line in handle:
            yield line[:-1]
