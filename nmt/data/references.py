"""Multi-reference sets (``{dev,test}.multi.tsv``): one line per distinct source sentence,
``source<TAB>reference1[<TAB>reference2...]``. Written by ``prepare``, read by validation and
``evaluate``."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from nmt.core.fileio import read_lines, write_lines_atomic


@dataclass
class ReferenceSet:
    sources: list[str]
    references: list[list[str]]  # every reference of each source


def write_references(path: Path, grouped: Iterable[tuple[str, list[str]]]) -> None:
    write_lines_atomic(path, ("\t".join([source, *refs]) for source, refs in grouped))


def read_references(path: Path) -> ReferenceSet:
    rows = [line.split("\t") for line in read_lines(path)]
    return ReferenceSet([row[0] for row in rows], [row[1:] for row in rows])
