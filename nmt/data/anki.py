"""Reading Anki/Tatoeba tab-separated sentence pairs.

Accepted: ``source<TAB>target`` or ``source<TAB>target<TAB>attribution``; UTF-8 with or
without a byte-order mark; LF or CRLF line endings; blank lines (ignored). Text is NFC
normalised and whitespace collapsed; no script is ever removed. Malformed lines are
collected as ``Problem``s with their 1-based line number.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

from nmt.errors import NmtError

BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class Pair:
    src: str
    tgt: str
    attribution: str  # third column, "" when the file has two
    line_no: int  # 1-based line in the source file


@dataclass(frozen=True)
class Problem:
    path: str
    line_no: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line_no}: {self.reason}"


@dataclass
class ReadResult:
    pairs: list[Pair] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    blank_lines: int = 0
    lines_read: int = 0
    clipped: int = 0  # pairs with a side longer than max_chars, clipped


def normalize_text(text: str) -> str:
    """NFC, collapse whitespace runs to one space, strip the ends. Every script passes through."""
    return " ".join(unicodedata.normalize("NFC", text).split())


def clip(text: str, max_chars: int) -> str:
    return text if len(text) <= max_chars else text[:max_chars].rstrip()


def parse_line(raw: bytes, line_no: int, path: str) -> Pair | Problem | None:
    """Parse one line (without its line ending). ``None`` for a blank line."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Problem(path, line_no, f"undecodable bytes (not UTF-8) at byte {exc.start}")
    if not text.strip():
        return None
    if "\x00" in text:
        return Problem(path, line_no, "NUL byte in line")
    columns = text.split("\t")
    if len(columns) < 2:
        return Problem(path, line_no, "one column (expected source<TAB>target[<TAB>attribution])")
    if len(columns) > 3:
        return Problem(path, line_no, f"{len(columns)} columns (expected 2 or 3)")
    src, tgt = normalize_text(columns[0]), normalize_text(columns[1])
    attribution = normalize_text(columns[2]) if len(columns) == 3 else ""
    if not src:
        return Problem(path, line_no, "empty source side")
    if not tgt:
        return Problem(path, line_no, "empty target side")
    return Pair(src, tgt, attribution, line_no)


def read_anki(path: str | Path, max_chars: int = 1000) -> ReadResult:
    """Read every line of an Anki TSV file; malformed lines become ``Problem``s; sentences
    longer than ``max_chars`` are clipped (and counted)."""
    path = Path(path)
    if not path.is_file():
        raise NmtError(f"Data file not found: {path}")
    data = path.read_bytes()
    if data.startswith(BOM):
        data = data[len(BOM) :]
    result = ReadResult()
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    for index, raw in enumerate(lines):
        line_no = index + 1
        result.lines_read += 1
        parsed = parse_line(raw.removesuffix(b"\r"), line_no, str(path))
        if parsed is None:
            result.blank_lines += 1
        elif isinstance(parsed, Problem):
            result.problems.append(parsed)
        else:
            if len(parsed.src) > max_chars or len(parsed.tgt) > max_chars:
                result.clipped += 1
                parsed = Pair(clip(parsed.src, max_chars), clip(parsed.tgt, max_chars), parsed.attribution, line_no)
            result.pairs.append(parsed)
    return result


def drop_duplicates(pairs: list[Pair]) -> tuple[list[Pair], int]:
    """Drop exact duplicate (source, target) pairs, keeping the first. Returns (kept, dropped)."""
    seen: set[tuple[str, str]] = set()
    kept = []
    for pair in pairs:
        key = (pair.src, pair.tgt)
        if key not in seen:
            seen.add(key)
            kept.append(pair)
    return kept, len(pairs) - len(kept)
