"""Token-id shards: one side of one split, encoded once by ``nmt prepare`` and read back
memory-mapped, so training never re-encodes the corpus nor holds its ids as Python lists.

A shard file (``<split>.<lang>.ids``) is::

    header   8 bytes magic b"NMTIDS2\\n", then little-endian uint64s: item size (2 or 4
             bytes per id), sentences N, ids in all T, largest id + 1 (the vocabulary it fits)
    ids      T unsigned ints of the item size, then zero bytes up to a multiple of 8
    offsets  (N + 1) int64: sentence i is ids[offsets[i]:offsets[i + 1]]

The ids come first so that a shard is written in one pass as sentences are encoded (the
header is filled in last); only the lengths are held while writing.

Opening one checks what can be checked cheaply and names the file when it fails: the magic,
the size the header implies against the file's, offsets that start at 0, never fall and end
at T, and ids within the vocabulary the reader expects.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence
from itertools import chain, islice
from pathlib import Path

import numpy as np

from nmt.core.errors import NmtError
from nmt.core.fileio import atomic_path
from nmt.data.batching import Example

MAGIC = b"NMTIDS2\n"
HEADER_BYTES = len(MAGIC) + 4 * 8
CHUNK = 8192  # sentences converted to an array at a time


def id_itemsize(vocab_size: int) -> int:
    return 2 if vocab_size <= 2**16 else 4


def _padded(nbytes: int) -> int:
    return -(-nbytes // 8) * 8


def write_shard(path: str | Path, id_lists: Iterable[list[int]], vocab_size: int) -> np.ndarray:
    """Write the sentences' ids (of a vocabulary of ``vocab_size``) as a shard, as they come and
    atomically (temp file + rename). Returns the sentences' lengths."""
    dtype = np.dtype("<u2" if id_itemsize(vocab_size) == 2 else "<u4")
    lengths, total, limit = array("q"), 0, 0
    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        handle.write(bytes(HEADER_BYTES))  # filled in once the counts are known
        sentences = iter(id_lists)
        while chunk := list(islice(sentences, CHUNK)):
            lengths.extend(len(ids) for ids in chunk)
            flat = np.fromiter(chain.from_iterable(chunk), dtype=np.int64)
            if flat.size:
                limit = max(limit, int(flat.max()) + 1)
            handle.write(flat.astype(dtype).tobytes())
            total += flat.size
        handle.write(bytes(_padded(total * dtype.itemsize) - total * dtype.itemsize))
        offsets = np.zeros(len(lengths) + 1, dtype="<i8")
        np.cumsum(np.frombuffer(lengths, dtype=np.int64), out=offsets[1:])
        handle.write(offsets.tobytes())
        handle.seek(0)
        handle.write(MAGIC + np.array([dtype.itemsize, len(lengths), total, limit], dtype="<u8").tobytes())
    return np.frombuffer(lengths, dtype=np.int64)


class Shard(Sequence):
    """A shard opened memory-mapped: ``shard[i]`` is sentence i's ids (a list), ``lengths``
    every sentence's length (a numpy array: the only per-sentence data held in memory)."""

    def __init__(self, path: str | Path, vocab_size: int):
        self.path = Path(path)
        if not self.path.is_file():
            raise NmtError(f"Token shard {self.path} is missing: run `nmt prepare --force` to write it again.")
        itemsize, count, total, limit = self._read_header()
        offsets_at = HEADER_BYTES + _padded(itemsize * total)
        self._check_size(offsets_at + 8 * (count + 1))
        self.offsets = np.memmap(self.path, dtype="<i8", mode="r", offset=offsets_at, shape=(count + 1,))
        dtype = np.dtype("<u2" if itemsize == 2 else "<u4")
        self.ids = (
            np.memmap(self.path, dtype=dtype, mode="r", offset=HEADER_BYTES, shape=(total,)) if total else np.zeros(0)
        )
        self.lengths = np.diff(self.offsets)
        if self.offsets[0] != 0 or self.offsets[-1] != total or (self.lengths < 0).any():
            self._refuse("its sentence offsets are inconsistent")
        if limit > vocab_size:
            self._refuse(f"it holds id {limit - 1}, beyond the vocabulary of {vocab_size}")

    def _refuse(self, why: str):
        raise NmtError(
            f"Token shard {self.path} is damaged: {why}. Run `nmt prepare --force` to write it again."
        ) from None

    def _read_header(self) -> tuple[int, int, int, int]:
        with open(self.path, "rb") as handle:
            head = handle.read(HEADER_BYTES)
        if len(head) < HEADER_BYTES or not head.startswith(MAGIC):
            self._refuse("it does not start with an nmt token-shard header")
        itemsize, count, total, limit = (int(v) for v in np.frombuffer(head[len(MAGIC) :], dtype="<u8"))
        if itemsize not in (2, 4):
            self._refuse(f"its header gives {itemsize} bytes per id")
        return itemsize, count, total, limit

    def _check_size(self, expected: int) -> None:
        size = self.path.stat().st_size
        if size != expected:
            self._refuse(f"it holds {size} bytes where its header implies {expected} (truncated?)")

    def __len__(self) -> int:
        return len(self.lengths)

    def __getitem__(self, index: int) -> list[int]:  # type: ignore[override]  # no slices
        return self.ids[self.offsets[index] : self.offsets[index + 1]].tolist()


class ShardPairs(Sequence):
    """Sentence pairs read from a source and a target shard of one split: ``pairs[i]`` is an
    ``Example``; ``kept`` (indices into the shards) leaves out pairs training skips."""

    def __init__(self, src: Shard, tgt: Shard, kept: np.ndarray | None = None):
        if len(src) != len(tgt):
            raise NmtError(
                f"Token shards {src.path} ({len(src)} sentences) and {tgt.path} ({len(tgt)}) differ in length."
            )
        self.src, self.tgt = src, tgt
        self.kept = np.arange(len(src)) if kept is None else kept

    def within_length(self, max_len: int) -> ShardPairs:
        """The pairs whose both sides have at most ``max_len`` ids."""
        fits = (self.src.lengths[self.kept] <= max_len) & (self.tgt.lengths[self.kept] <= max_len)
        return ShardPairs(self.src, self.tgt, self.kept[fits])

    def subset(self, positions: np.ndarray) -> ShardPairs:
        """The pairs at ``positions`` (indices into these pairs), in that order."""
        return ShardPairs(self.src, self.tgt, self.kept[positions])

    def lengths(self) -> tuple[np.ndarray, np.ndarray]:
        """(source lengths, target lengths) of the pairs, in order."""
        return self.src.lengths[self.kept], self.tgt.lengths[self.kept]

    def __len__(self) -> int:
        return len(self.kept)

    def __getitem__(self, index: int) -> Example:  # type: ignore[override]  # no slices
        row = int(self.kept[index])
        return Example(self.src[row], self.tgt[row])
