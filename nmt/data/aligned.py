"""Reading line-aligned text files (Moses style): line i of each file is one sentence of pair i.

``data.train: {en: train.en, mr: train.mr}``; a given dev or test set may have several target
files, each one more reference for the same source line (``data.test: {en: test.en, mr:
[test.ref1, test.ref2]}``). Files of different lengths are refused, naming both paths and counts.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from itertools import zip_longest
from pathlib import Path

from nmt.core.errors import NmtError
from nmt.core.fileio import binary_lines
from nmt.data.pairs import Pair, Problem, ReadResult, decode_line, normalize_text


@dataclass
class ReferenceRows:
    """A given dev/test set as it is: one row per source line with every reference it has."""

    rows: list[tuple[str, list[str]]] = field(default_factory=list)
    read: ReadResult = field(default_factory=ReadResult)  # the pairs (source, one reference) and problems
    files: list[Path] = field(default_factory=list)  # the source file, then the target file(s)


def _lines(path: Path, key: str, stack: ExitStack) -> Iterator[bytes]:
    if not path.is_file():
        raise NmtError(f"File not found: {path} (config key '{key}').")
    return binary_lines(stack.enter_context(open(path, "rb")))


def _not_aligned(key: str, paths: list[Path], counts: list[int]) -> NmtError:
    (src_path, *tgt_paths), (src_count, *tgt_counts) = paths, counts
    path, count = next((p, c) for p, c in zip(tgt_paths, tgt_counts) if c != src_count)
    return NmtError(
        f"{key}: the files are not line-aligned: {src_path} has {src_count} lines, "
        f"{path} has {count}. Line i of each file must be the same sentence pair."
    )


def aligned_lines(key: str, paths: list[Path]) -> Iterator[list[str | Problem]]:
    """Line i of every file, decoded (or the line's ``Problem``), read as they come. Files of
    different lengths are refused when the shorter one ends, with every file's line count."""
    with ExitStack() as stack:
        readers = [_lines(path, key, stack) for path in paths]
        for index, raws in enumerate(zip_longest(*readers)):
            if any(raw is None for raw in raws):
                counts = [index + (raw is not None) + sum(1 for _ in reader) for raw, reader in zip(raws, readers)]
                raise _not_aligned(key, paths, counts)
            yield [decode_line(raw, index + 1, str(path)) for raw, path in zip(raws, paths)]


def aligned_pairs(
    key: str, src_path: Path, tgt_paths: list[Path], max_chars: int, result: ReadResult
) -> Iterator[list[Pair]]:
    """The pairs of each usable line: (source, reference) for every reference it has. ``key``
    is the config key the files came from (``data.train``), named in errors. A line that is
    blank on every side is counted as blank; a blank source, or blank on every target, is a
    problem of that line."""
    for index, sides in enumerate(aligned_lines(key, [src_path, *tgt_paths])):
        line_no = index + 1
        result.lines_read += 1
        problem = next((side for side in sides if isinstance(side, Problem)), None)
        if problem is not None:
            result.add_problem(problem)
            continue
        src, *refs = (normalize_text(side) for side in sides if isinstance(side, str))  # no Problem: above
        if not src and not any(refs):
            result.blank_lines += 1
        elif not src:
            result.add_problem(Problem(str(src_path), line_no, "empty source side"))
        elif not any(refs):
            where = tgt_paths[0] if len(tgt_paths) == 1 else ", ".join(map(str, tgt_paths))
            result.add_problem(Problem(str(where), line_no, "empty target side"))
        else:  # a blank line in a second reference file: no second reference
            yield [result.add_pair(src, ref, "", line_no, max_chars) for ref in refs if ref]


def read_aligned(key: str, src_path: Path, tgt_paths: list[Path], max_chars: int) -> ReferenceRows:
    """A source file and its target file(s), line-aligned, collected row by row."""
    out = ReferenceRows(files=[src_path, *tgt_paths])
    for pairs in aligned_pairs(key, src_path, tgt_paths, max_chars, out.read):
        out.read.pairs += pairs
        out.rows.append((pairs[0].src, [pair.tgt for pair in pairs]))
    return out
