"""What every data source reads into: sentence pairs, and the problems of lines that are not.

Text is NFC normalised and whitespace collapsed; no script is ever removed. A malformed line
becomes a ``Problem`` naming its file and 1-based line number, and every file a config names
(the corpus, given sets, related corpora, a word list, self-training's sentences) and ``nmt
init`` reads is judged by one rule (``check_read``): an empty file, or one mostly malformed
(another encoding, binary content, the wrong columns) is refused naming its first bad lines.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from nmt.core.errors import NmtError


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

    @property
    def kind(self) -> str:
        """The reason without its particulars, for counting problems by kind."""
        return self.reason.split(" at byte")[0]


@dataclass
class ReadResult:
    """What reading a file found: its pairs (when collected), its problems and its counts.

    A streaming read (``nmt prepare``) collects no pairs and keeps only the first
    ``keep_problems`` problems, handing every one to ``on_problem`` (problems.txt)."""

    pairs: list[Pair] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)  # all of them, or the first keep_problems
    blank_lines: int = 0
    lines_read: int = 0
    clipped: int = 0  # pairs with a side longer than max_chars, clipped
    header: str = ""  # a TSV's first line when it named the columns (not a pair)
    lone_cr: int = 0  # line breaks that were a lone carriage return (read as line breaks)
    pairs_read: int = 0
    problem_count: int = 0
    problems_by_kind: dict[str, int] = field(default_factory=dict)
    keep_problems: int | None = None  # None: keep every problem
    on_problem: Callable[[Problem], object] | None = None

    def add_problem(self, problem: Problem) -> None:
        self.problem_count += 1
        self.problems_by_kind[problem.kind] = self.problems_by_kind.get(problem.kind, 0) + 1
        if self.keep_problems is None or len(self.problems) < self.keep_problems:
            self.problems.append(problem)
        if self.on_problem is not None:
            self.on_problem(problem)

    def add_pair(self, src: str, tgt: str, attribution: str, line_no: int, max_chars: int) -> Pair:
        """Count a pair read, clipping (and counting) a side longer than ``max_chars``."""
        self.pairs_read += 1
        if len(src) > max_chars or len(tgt) > max_chars:
            self.clipped += 1
            src, tgt = clip(src, max_chars), clip(tgt, max_chars)
        return Pair(src, tgt, attribution, line_no)


def normalize_text(text: str) -> str:
    """NFC, collapse whitespace runs to one space, strip the ends. Every script passes through."""
    return " ".join(unicodedata.normalize("NFC", text).split())


def is_blank(text: str) -> bool:
    """Nothing to translate: only whitespace and invisible format characters (a byte-order mark,
    zero-width spaces and joiners, Unicode category Cf), which normalising leaves in place."""
    return all(unicodedata.category(char) == "Cf" for char in normalize_text(text))


def clip(text: str, max_chars: int) -> str:
    return text if len(text) <= max_chars else text[:max_chars].rstrip()


def decode_line(raw: bytes, line_no: int, path: str) -> str | Problem:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Problem(path, line_no, f"undecodable bytes (not UTF-8) at byte {exc.start}")
    if "\x00" in text:
        return Problem(path, line_no, "NUL byte in line")
    return text


def drop_duplicates(pairs: list[Pair]) -> tuple[list[Pair], int]:
    """Drop exact duplicate (source, target) pairs, keeping the first. Returns (kept, dropped).
    (The rule in memory; ``nmt.data.distinct`` applies it to a corpus of any size.)"""
    seen: set[tuple[str, str]] = set()
    kept = []
    for pair in pairs:
        key = (pair.src, pair.tgt)
        if key not in seen:
            seen.add(key)
            kept.append(pair)
    return kept, len(pairs) - len(kept)


MAX_PROBLEMS_SHOWN = 10
# what a file that is mostly malformed was expected to hold, by kind
TSV = "an Anki/Tatoeba TSV file (source<TAB>target per line)"
LINES = "line-aligned text files (one sentence per line, line i of each file the same pair)"
SENTENCES = "source sentences, one a line (or a TSV whose first column is the source)"


def check_read(
    result: ReadResult,
    path: str | Path,
    expected: str,
    on_malformed: str = "skip",
    log=print,
    key: str = "",
    listed_in: str = "",
) -> None:
    """Refuse a file that is empty or not ``expected`` (over half its lines malformed: another
    encoding, binary content), or any malformed line with ``on_malformed="error"``; otherwise
    show the first few skipped lines through ``log``. ``key``: the config key that named the file;
    ``listed_in``: where every skipped line is written, if anywhere."""
    named = f"{key}: " if key else ""
    content_lines = result.lines_read - result.blank_lines
    if content_lines == 0:
        raise NmtError(f"{named}{path} is empty: nothing to read.")
    if result.problem_count > content_lines / 2:
        shown = "\n".join(f"  {p}" for p in result.problems[:3])
        raise NmtError(
            f"{named}{path} does not look like {expected}: "
            f"{result.problem_count} of {content_lines} lines are malformed, e.g.\n{shown}"
        )
    if result.problem_count and on_malformed == "error":
        shown = "\n".join(f"  {p}" for p in result.problems[:MAX_PROBLEMS_SHOWN])
        more = result.problem_count - MAX_PROBLEMS_SHOWN
        raise NmtError(
            f"{named}{result.problem_count} malformed line(s) in {path} (data.on_malformed=error):\n{shown}"
            + (f"\n  ... and {more} more" if more > 0 else "")
            + "\nFix them, or set data.on_malformed=skip to skip them with a count."
        )
    for problem in result.problems[:MAX_PROBLEMS_SHOWN]:
        log(f"skipped {problem}")
    if result.problem_count > MAX_PROBLEMS_SHOWN:
        where = f" (see {listed_in})" if listed_in else ""
        log(f"... and {result.problem_count - MAX_PROBLEMS_SHOWN} more malformed lines{where}")
