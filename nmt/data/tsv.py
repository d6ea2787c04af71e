"""Reading tab-separated sentence pairs: Anki/Tatoeba files and any TSV.

Accepted: ``a<TAB>b`` or ``a<TAB>b<TAB>attribution``, where ``data.columns`` says which of a
and b is the source language (default: the source first); UTF-8 with or without a byte-order
mark; LF, CRLF or lone CR line endings (a lone CR counted: ``ReadResult.lone_cr``); blank lines
(ignored). A first line that names the columns
("Eng<TAB>Mar<TAB>Oth") is a header, not a pair: detected, or declared with ``data.header``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from nmt.config.schema import HeaderMode as Header
from nmt.core.errors import NmtError
from nmt.core.fileio import LineEnds, binary_lines
from nmt.data.languages import looks_like_header
from nmt.data.pairs import Pair, Problem, ReadResult, decode_line, normalize_text


def parse_line(raw: bytes, line_no: int, path: str, source_first: bool = True) -> Pair | Problem | None:
    """Parse one line (without its line ending). ``None`` for a blank line."""
    text = decode_line(raw, line_no, path)
    if isinstance(text, Problem):
        return text
    if not text.strip():
        return None
    columns = text.split("\t")
    if len(columns) < 2:
        return Problem(path, line_no, "one column (expected source<TAB>target[<TAB>attribution])")
    if len(columns) > 3:
        return Problem(path, line_no, f"{len(columns)} columns (expected 2 or 3)")
    first, second = normalize_text(columns[0]), normalize_text(columns[1])
    src, tgt = (first, second) if source_first else (second, first)
    attribution = normalize_text(columns[2]) if len(columns) == 3 else ""
    if not src:
        return Problem(path, line_no, "empty source side")
    if not tgt:
        return Problem(path, line_no, "empty target side")
    return Pair(src, tgt, attribution, line_no)


def tsv_pairs(
    path: str | Path,
    result: ReadResult,
    max_chars: int = 1000,
    columns: list[str] | None = None,
    src_lang: str = "",
    header: Header = "auto",
) -> Iterator[Pair]:
    """The pairs ``(src_lang, other)`` of a TSV file, read line by line; malformed lines, blank
    lines, the header and clipped sentences are counted into ``result``.

    ``columns`` names the two language columns in file order (``None``: source first)."""
    path = Path(path)
    if not path.is_file():
        raise NmtError(f"Data file not found: {path}")
    source_first = not columns or columns[0] == src_lang
    ends = LineEnds()
    with open(path, "rb") as handle:
        try:
            for index, line in enumerate(binary_lines(handle, ends)):
                if index == 0 and _is_header(line, header, columns or []):
                    result.header = line.decode("utf-8", errors="replace")
                    result.lines_read = 1
                    continue
                result.lines_read += 1
                parsed = parse_line(line, index + 1, str(path), source_first)
                if parsed is None:
                    result.blank_lines += 1
                elif isinstance(parsed, Problem):
                    result.add_problem(parsed)
                else:
                    yield result.add_pair(parsed.src, parsed.tgt, parsed.attribution, index + 1, max_chars)
        finally:
            result.lone_cr += ends.lone_cr


def read_tsv(
    path: str | Path,
    max_chars: int = 1000,
    columns: list[str] | None = None,
    src_lang: str = "",
    header: Header = "auto",
) -> ReadResult:
    """Every pair and problem of a TSV file, collected (see ``tsv_pairs``)."""
    result = ReadResult()
    result.pairs = list(tsv_pairs(path, result, max_chars, columns, src_lang, header))
    return result


def source_sentences(path: str | Path, result: ReadResult) -> Iterator[str]:
    """The sentences of a file of source sentences, one a line (a TSV: its first column),
    normalised; undecodable lines and NUL bytes are problems counted into ``result``, as the
    corpus's are, and blank lines are counted and skipped."""
    path = Path(path)
    if not path.is_file():
        raise NmtError(f"Data file not found: {path}")
    with open(path, "rb") as handle:
        for index, line in enumerate(binary_lines(handle)):
            result.lines_read += 1
            text = decode_line(line, index + 1, str(path))
            if isinstance(text, Problem):
                result.add_problem(text)
                continue
            sentence = normalize_text(text.split("\t", 1)[0])
            if not sentence:
                result.blank_lines += 1
                continue
            result.pairs_read += 1
            yield sentence


def _is_header(first_line: bytes, header: Header, declared: list[str]) -> bool:
    if header is not True and header is not False:  # auto
        text = decode_line(first_line, 1, "")
        cells = text.split("\t") if isinstance(text, str) else []
        return len(cells) in (2, 3) and looks_like_header(cells, declared)
    return header
