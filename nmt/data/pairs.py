"""What every data source reads into: sentence pairs, and the problems of lines that are not.

Text is NFC normalised and whitespace collapsed; no script is ever removed. A malformed line
becomes a ``Problem`` naming its file and 1-based line number.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field

BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class Pair:
    src: str
    tgt: str
    attribution: str  # a TSV's third column, "" when there is none
    line_no: int  # 1-based line in the file it was read from


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
    header: str = ""  # a TSV's first line when it named the columns (not a pair)


def normalize_text(text: str) -> str:
    """NFC, collapse whitespace runs to one space, strip the ends. Every script passes through."""
    return " ".join(unicodedata.normalize("NFC", text).split())


def clip(text: str, max_chars: int) -> str:
    return text if len(text) <= max_chars else text[:max_chars].rstrip()


def raw_lines(data: bytes) -> list[bytes]:
    """A file's lines without their endings (LF or CRLF), a leading byte-order mark dropped."""
    data = data.removeprefix(BOM)
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return [line.removesuffix(b"\r") for line in lines]


def decode_line(raw: bytes, line_no: int, path: str) -> str | Problem:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Problem(path, line_no, f"undecodable bytes (not UTF-8) at byte {exc.start}")
    if "\x00" in text:
        return Problem(path, line_no, "NUL byte in line")
    return text


def add_pair(result: ReadResult, src: str, tgt: str, attribution: str, line_no: int, max_chars: int) -> None:
    """Keep a pair, clipping (and counting) a side longer than ``max_chars``."""
    if len(src) > max_chars or len(tgt) > max_chars:
        result.clipped += 1
        src, tgt = clip(src, max_chars), clip(tgt, max_chars)
    result.pairs.append(Pair(src, tgt, attribution, line_no))


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
