"""Where a config's sentence pairs come from: a TSV file (or an Anki zip) or line-aligned
files for training, and dev/test sets given as files or left to be carved out of training.

``read_corpus`` is what ``nmt prepare`` reads; the checks on each kind live with its reader
(``nmt.data.tsv``, ``nmt.data.aligned``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path

from nmt.config.schema import DataConfig
from nmt.core.errors import NmtError
from nmt.data.aligned import ReferenceRows, aligned_pairs, read_aligned
from nmt.data.download import tsv_file
from nmt.data.pairs import Pair, Problem, ReadResult
from nmt.data.tsv import tsv_pairs

GIVEN_SPLITS = ("dev", "test")


@dataclass
class Corpus:
    """The training data, read afresh from its file(s) on every pass (never held), and any
    dev/test sets given as files (small: read once, row by row)."""

    data: DataConfig
    train_path: Path  # what is read for training (a zip's unpacked TSV)
    given: dict[str, ReferenceRows] = field(default_factory=dict)  # "dev" / "test" as given

    def train_pairs(self, result: ReadResult) -> Iterator[Pair]:
        """Every training pair in file order (the first ``data.max_pairs`` when set); lines,
        problems and clipped sentences are counted into ``result``."""
        data = self.data
        if data.path:
            pairs = tsv_pairs(self.train_path, result, data.max_chars, data.tsv_columns, data.src_lang, data.header)
        else:
            src, targets = language_files(data.train, data)
            pairs = chain.from_iterable(aligned_pairs("data.train", src, targets, data.max_chars, result))
        for index, pair in enumerate(pairs):
            if not data.max_pairs or index < data.max_pairs:
                yield pair

    @property
    def given_problems(self) -> list[Problem]:
        return [p for given in self.given.values() for p in given.read.problems]


def language_files(files: dict, data: DataConfig) -> tuple[Path, list[Path]]:
    """(source file, target file(s)) of a ``{lang: file}`` mapping."""
    targets = files[data.tgt_lang]
    return Path(files[data.src_lang]), [Path(t) for t in ([targets] if isinstance(targets, str) else targets)]


def input_files(data: DataConfig) -> list[Path]:
    """Every file a config reads, in a fixed order; refuses one that does not exist."""
    named: list[tuple[str, Path]] = [("data.path", Path(data.path))] if data.path else []
    for key in ("train", *GIVEN_SPLITS):
        files = getattr(data, key)
        if files:
            src, tgts = language_files(files, data)
            named += [(f"data.{key}.{data.src_lang}", src), *((f"data.{key}.{data.tgt_lang}", t) for t in tgts)]
    named += [(f"data.related.{lang}", Path(path)) for lang, path in data.related.items()]
    named += [("data.synthetic_from", Path(data.synthetic_from))] if data.synthetic_from else []
    for key, path in named:
        if not path.is_file():
            raise NmtError(f"Data file not found: {path} (config key '{key}').")
    return [path for _, path in named]


def describe(data: DataConfig) -> str:
    """The training data in a few words, for reports."""
    if data.path:
        return data.path
    src, (tgt,) = language_files(data.train, data)
    return f"{src} + {tgt}"


def read_corpus(data: DataConfig, unpack_dir: Path) -> Corpus:
    """The training data's source (an Anki zip is unpacked into ``unpack_dir``) and any given
    dev/test sets, read."""
    path = tsv_file(Path(data.path), unpack_dir) if data.path else language_files(data.train, data)[0]
    given = {}
    for split in GIVEN_SPLITS:
        files = getattr(data, split)
        if files:
            src, targets = language_files(files, data)
            given[split] = read_aligned(f"data.{split}", src, targets, data.max_chars)
    return Corpus(data, path, given)
