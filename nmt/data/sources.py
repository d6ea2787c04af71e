"""Where a config's sentence pairs come from: a TSV file (or an Anki zip) or line-aligned
files for training, and dev/test sets given as files or left to be carved out of training.

``read_corpus`` is what ``nmt prepare`` reads; the checks on each kind live with its reader
(``nmt.data.tsv``, ``nmt.data.aligned``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from nmt.config import DataConfig
from nmt.data.aligned import ReferenceRows, read_aligned
from nmt.data.pairs import Problem, ReadResult
from nmt.data.tsv import read_tsv
from nmt.errors import NmtError

GIVEN_SPLITS = ("dev", "test")


@dataclass
class Corpus:
    train: ReadResult  # the training pairs (dev and test are carved out of them unless given)
    given: dict[str, ReferenceRows] = field(default_factory=dict)  # "dev" / "test" as given, row by row
    train_path: Path = Path()  # what was read for training (a zip's unpacked TSV)

    @property
    def problems(self) -> list[Problem]:
        """Every malformed line read, training data first."""
        return [*self.train.problems, *(p for given in self.given.values() for p in given.read.problems)]


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
    """Read the training data and any given dev/test sets (an Anki zip is unpacked into ``unpack_dir``)."""
    if data.path:
        path = Path(data.path)
        if path.suffix.lower() == ".zip":  # an Anki archive: verify, unpack, read its pairs
            from nmt.data.download import unpack

            path = unpack(path, unpack_dir)
        train = read_tsv(path, data.max_chars, data.tsv_columns, data.src_lang, data.header)
    else:
        path, targets = language_files(data.train, data)
        train = read_aligned("data.train", path, targets, data.max_chars).read
    given = {}
    for split in GIVEN_SPLITS:
        files = getattr(data, split)
        if files:
            src, targets = language_files(files, data)
            given[split] = read_aligned(f"data.{split}", src, targets, data.max_chars)
    return Corpus(train, given, path)
