"""Token-id shards: one side of one split, encoded once by ``nmt prepare`` and read back
memory-mapped, so training never re-encodes the corpus nor holds its ids as Python lists.

A shard file (``<split>.<lang>.ids``) is::

    header   8 bytes magic b"NMTIDS1\\n", then little-endian uint64s: item size (2 or 4
             bytes per id), sentences N, ids in all T, largest id + 1 (the vocabulary it fits)
    offsets  (N + 1) int64: sentence i is ids[offsets[i]:offsets[i + 1]]
    ids      T unsigned ints of the item size

Opening one checks what can be checked cheaply and names the file when it fails: the magic,
the size the header implies against the file's, offsets that start at 0, never fall and end
at T, and ids within the vocabulary the reader expects.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from nmt.data.batching import Example
from nmt.errors import NmtError
from nmt.fileio import save_atomic

MAGIC = b"NMTIDS1\n"
HEADER_BYTES = len(MAGIC) + 4 * 8


def write_shard(path: str | Path, id_lists: Iterable[list[int]]) -> Path:
    """Write the sentences' ids as a shard, atomically (temp file + rename)."""
    lengths, flat = [], []
    for ids in id_lists:
        lengths.append(len(ids))
        flat.extend(ids)
    ids = np.asarray(flat, dtype=np.int64)
    limit = int(ids.max()) + 1 if ids.size else 0
    dtype = np.uint16 if limit <= 2**16 else np.uint32
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    header = MAGIC + np.array([np.dtype(dtype).itemsize, len(lengths), ids.size, limit], dtype="<u8").tobytes()

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as handle:
            handle.write(header)
            handle.write(offsets.astype("<i8").tobytes())
            handle.write(ids.astype(np.dtype(dtype).newbyteorder("<")).tobytes())

    save_atomic(path, write)
    return Path(path)


class Shard(Sequence):
    """A shard opened memory-mapped: ``shard[i]`` is sentence i's ids (a list), ``lengths``
    every sentence's length (a numpy array: the only per-sentence data held in memory)."""

    def __init__(self, path: str | Path, vocab_size: int):
        self.path = Path(path)
        if not self.path.is_file():
            raise NmtError(f"Token shard {self.path} is missing: run `nmt prepare --force` to write it again.")
        itemsize, count, total, limit = self._read_header()
        self._check_size(HEADER_BYTES + 8 * (count + 1) + itemsize * total)
        self.offsets = np.memmap(self.path, dtype="<i8", mode="r", offset=HEADER_BYTES, shape=(count + 1,))
        dtype = np.dtype("<u2" if itemsize == 2 else "<u4")
        start = HEADER_BYTES + 8 * (count + 1)
        self.ids = np.memmap(self.path, dtype=dtype, mode="r", offset=start, shape=(total,)) if total else np.zeros(0)
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

    def __getitem__(self, index: int) -> list[int]:
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

    def lengths(self) -> tuple[np.ndarray, np.ndarray]:
        """(source lengths, target lengths) of the pairs, in order."""
        return self.src.lengths[self.kept], self.tgt.lengths[self.kept]

    def __len__(self) -> int:
        return len(self.kept)

    def __getitem__(self, index: int) -> Example:
        row = int(self.kept[index])
        return Example(self.src[row], self.tgt[row])
