"""Reading line-aligned text files (Moses style): line i of each file is one sentence of pair i.

``data.train: {en: train.en, mr: train.mr}``; a given dev or test set may have several target
files, each one more reference for the same source line (``data.test: {en: test.en, mr:
[test.ref1, test.ref2]}``). Files of different lengths are refused, naming both paths and counts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from nmt.data.pairs import Problem, ReadResult, add_pair, decode_line, normalize_text, raw_lines
from nmt.errors import NmtError


@dataclass
class ReferenceRows:
    """A given dev/test set as it is: one row per source line with every reference it has."""

    rows: list[tuple[str, list[str]]] = field(default_factory=list)
    read: ReadResult = field(default_factory=ReadResult)  # the pairs (source, one reference) and problems
    files: list[Path] = field(default_factory=list)  # the source file, then the target file(s)


def _read_lines(path: Path, key: str) -> list[str | Problem]:
    if not path.is_file():
        raise NmtError(f"File not found: {path} (config key '{key}').")
    return [decode_line(raw, index + 1, str(path)) for index, raw in enumerate(raw_lines(path.read_bytes()))]


def read_aligned(key: str, src_path: Path, tgt_paths: list[Path], max_chars: int) -> ReferenceRows:
    """Read a source file and its target file(s), line-aligned. ``key`` is the config key they
    came from (``data.train``), named in errors. A line that is blank on every side is skipped
    as blank; a blank source, or blank on every target, is a problem of that line."""
    src_lines = _read_lines(src_path, key)
    tgt_lines = [_read_lines(path, key) for path in tgt_paths]
    for path, lines in zip(tgt_paths, tgt_lines):
        if len(lines) != len(src_lines):
            raise NmtError(
                f"{key}: the files are not line-aligned: {src_path} has {len(src_lines)} lines, "
                f"{path} has {len(lines)}. Line i of each file must be the same sentence pair."
            )
    out = ReferenceRows(files=[src_path, *tgt_paths])
    out.read.lines_read = len(src_lines)
    for index, src_text in enumerate(src_lines):
        line_no = index + 1
        sides = [src_text, *(lines[index] for lines in tgt_lines)]
        problem = next((side for side in sides if isinstance(side, Problem)), None)
        if problem is not None:
            out.read.problems.append(problem)
            continue
        src, *refs = (normalize_text(side) for side in sides)
        if not src and not any(refs):
            out.read.blank_lines += 1
        elif not src:
            out.read.problems.append(Problem(str(src_path), line_no, "empty source side"))
        elif not any(refs):
            where = tgt_paths[0] if len(tgt_paths) == 1 else ", ".join(map(str, tgt_paths))
            out.read.problems.append(Problem(str(where), line_no, "empty target side"))
        else:
            refs = [ref for ref in refs if ref]  # a blank line in a second reference file: no second reference
            for ref in refs:
                add_pair(out.read, src, ref, "", line_no, max_chars)
            count = len(refs)
            out.rows.append((out.read.pairs[-count].src, [pair.tgt for pair in out.read.pairs[-count:]]))
    return out
