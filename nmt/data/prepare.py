"""``nmt prepare``: TSV -> cleaned, split text files + one SentencePiece model per language.

Layout of the prepared directory (``<run_dir>/data`` by default)::

    {train,dev,test}.{src_lang,tgt_lang}   parallel pairs, one per line
    {train,dev,test}.attribution          the third TSV column (or empty), line-aligned
    {dev,test}.multi.tsv                  source<TAB>ref1[<TAB>ref2...]: every reference
    spm.{src_lang}.model, spm.{tgt_lang}.model
    problems.txt                          every malformed line, as path:line: reason
    report.json, report.txt               counts, split sizes, length statistics
    manifest.json                         fingerprint of inputs + config, for reuse
"""

from __future__ import annotations

import hashlib
import json
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path

from nmt.config import Config
from nmt.data.anki import Pair, drop_duplicates, read_anki
from nmt.data.split import Splits, group_references, split_by_source
from nmt.errors import NmtError
from nmt.fileio import sha256_file, write_lines_atomic, write_text_atomic
from nmt.tokenizer import Tokenizer, train_sentencepiece

FORMAT_VERSION = 2
SPLITS = ("train", "dev", "test")
MAX_PROBLEMS_SHOWN = 10


@dataclass
class PreparedPaths:
    root: Path
    src_lang: str
    tgt_lang: str

    def text(self, split: str, side: str) -> Path:
        return self.root / f"{split}.{self.src_lang if side == 'src' else self.tgt_lang}"

    def multi(self, split: str) -> Path:
        return self.root / f"{split}.multi.tsv"

    def spm(self, side: str) -> Path:
        return self.root / f"spm.{self.src_lang if side == 'src' else self.tgt_lang}.model"

    @property
    def report(self) -> Path:
        return self.root / "report.json"

    @property
    def manifest(self) -> Path:
        return self.root / "manifest.json"

    def outputs(self) -> list[Path]:
        files = [self.text(s, side) for s in SPLITS for side in ("src", "tgt")]
        files += [self.root / f"{s}.attribution" for s in SPLITS]
        files += [self.multi("dev"), self.multi("test"), self.spm("src"), self.spm("tgt")]
        return files + [self.root / "problems.txt", self.root / "report.txt", self.report, self.manifest]


def prepared_paths(config: Config) -> PreparedPaths:
    return PreparedPaths(config.prepared_dir, config.data.src_lang, config.data.tgt_lang)


@dataclass
class PrepareReport:
    input_path: str
    input_sha256: str
    lines_read: int
    blank_lines: int
    pairs_read: int
    malformed: int
    malformed_by_reason: dict[str, int]
    malformed_lines: list[str]  # first MAX_PROBLEMS_SHOWN as path:line: reason
    duplicates_dropped: int
    clipped: int  # pairs with a sentence longer than data.max_chars, clipped to it
    pairs_kept: int
    split_pairs: dict[str, int]
    split_sources: dict[str, int]
    length_stats: dict[str, dict[str, float]] = field(default_factory=dict)
    vocab_sizes: dict[str, int] = field(default_factory=dict)
    reused: bool = False

    def summary(self) -> str:
        lines = [
            f"Read {self.lines_read} lines from {self.input_path}: {self.pairs_read} pairs, "
            f"{self.blank_lines} blank, {self.malformed} malformed (skipped).",
        ]
        for reason, count in sorted(self.malformed_by_reason.items()):
            lines.append(f"  {count} x {reason}")
        if self.clipped:
            lines.append(f"Clipped {self.clipped} pair(s) with a sentence longer than data.max_chars.")
        lines.append(f"Dropped {self.duplicates_dropped} exact duplicate pairs; kept {self.pairs_kept}.")
        for split in SPLITS:
            lines.append(
                f"  {split:5s}: {self.split_pairs[split]:6d} pairs, {self.split_sources[split]:6d} distinct sources"
            )
        for side, stats in self.length_stats.items():
            lines.append(
                f"  {side} length in subwords (train): mean {stats['mean']:.1f}, "
                f"median {stats['median']:.0f}, p95 {stats['p95']:.0f}, max {stats['max']:.0f}"
            )
        lines.append(f"  vocabulary sizes: {self.vocab_sizes}")
        return "\n".join(lines)


def _fingerprint(config: Config, input_sha256: str) -> str:
    payload = {
        "format": FORMAT_VERSION,
        "input_sha256": input_sha256,
        "data": {k: v for k, v in asdict(config.data).items() if k != "prepared_dir"},
        "tokenizer": asdict(config.tokenizer),
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode("utf-8")).hexdigest()


def _length_stats(lengths: list[int]) -> dict[str, float]:
    ordered = sorted(lengths)
    return {
        "mean": statistics.fmean(ordered),
        "median": statistics.median(ordered),
        "p95": ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))],
        "max": ordered[-1],
    }


def _write_splits(paths: PreparedPaths, splits: Splits) -> None:
    for split in SPLITS:
        pairs: list[Pair] = getattr(splits, split)
        write_lines_atomic(paths.text(split, "src"), (p.src for p in pairs))
        write_lines_atomic(paths.text(split, "tgt"), (p.tgt for p in pairs))
        write_lines_atomic(paths.root / f"{split}.attribution", (p.attribution for p in pairs))
    for split in ("dev", "test"):
        grouped = group_references(getattr(splits, split))
        write_lines_atomic(paths.multi(split), ("\t".join([src, *refs]) for src, refs in grouped))


def load_report(paths: PreparedPaths) -> dict:
    with open(paths.report, encoding="utf-8") as handle:
        return json.load(handle)


def is_prepared(config: Config) -> bool:
    paths = prepared_paths(config)
    return all(p.is_file() for p in paths.outputs())


def prepare(config: Config, force: bool = False, log=print) -> PrepareReport:
    """Read, clean, split and tokenize ``config.data.path`` into the prepared directory."""
    paths = prepared_paths(config)
    data_path = Path(config.data.path)
    if not data_path.is_file():
        raise NmtError(f"Data file not found: {data_path} (config key 'data.path').")
    input_sha256 = sha256_file(data_path)
    fingerprint = _fingerprint(config, input_sha256)
    if not force and is_prepared(config):
        with open(paths.manifest, encoding="utf-8") as handle:
            if json.load(handle).get("fingerprint") == fingerprint:
                report = PrepareReport(**load_report(paths))
                report.reused = True
                return report

    if data_path.suffix.lower() == ".zip":  # an Anki archive: verify, unpack, read its pairs
        from nmt.data.download import unpack

        data_path = unpack(data_path, paths.root / "source")
    result = read_anki(data_path, config.data.max_chars)
    content_lines = result.lines_read - result.blank_lines
    if content_lines == 0:
        raise NmtError(f"{data_path} is empty: no sentence pairs to prepare.")
    if len(result.problems) > content_lines / 2:
        shown = "\n".join(f"  {p}" for p in result.problems[:3])
        raise NmtError(
            f"{data_path} does not look like an Anki/Tatoeba TSV file (source<TAB>target per line): "
            f"{len(result.problems)} of {content_lines} lines are malformed, e.g.\n{shown}"
        )
    if result.problems and config.data.on_malformed == "error":
        shown = "\n".join(f"  {p}" for p in result.problems[:MAX_PROBLEMS_SHOWN])
        more = len(result.problems) - MAX_PROBLEMS_SHOWN
        raise NmtError(
            f"{len(result.problems)} malformed line(s) in {data_path} (data.on_malformed=error):\n{shown}"
            + (f"\n  ... and {more} more" if more > 0 else "")
            + "\nFix them, or set data.on_malformed=skip to skip them with a count."
        )
    for problem in result.problems[:MAX_PROBLEMS_SHOWN]:
        log(f"skipped {problem}")
    if len(result.problems) > MAX_PROBLEMS_SHOWN:
        log(f"... and {len(result.problems) - MAX_PROBLEMS_SHOWN} more malformed lines (see problems.txt)")

    pairs = result.pairs[: config.data.max_pairs] if config.data.max_pairs else result.pairs
    kept, duplicates = drop_duplicates(pairs)
    if len({p.src for p in kept}) < 3:
        raise NmtError(f"{data_path} holds {len(kept)} usable pair(s): too few to split into train, dev and test.")
    splits = split_by_source(kept, config.data.dev_size, config.data.test_size, config.data.split_seed)

    paths.root.mkdir(parents=True, exist_ok=True)
    write_lines_atomic(paths.root / "problems.txt", (str(p) for p in result.problems))
    _write_splits(paths, splits)
    tok = config.tokenizer
    train_sentencepiece([p.src for p in splits.train], paths.spm("src"), tok.src_vocab_size, tok.model_type, tok.character_coverage)
    train_sentencepiece([p.tgt for p in splits.train], paths.spm("tgt"), tok.tgt_vocab_size, tok.model_type, tok.character_coverage)
    src_tok, tgt_tok = Tokenizer(paths.spm("src")), Tokenizer(paths.spm("tgt"))

    by_reason: dict[str, int] = {}
    for problem in result.problems:
        key = problem.reason.split(" at byte")[0]
        by_reason[key] = by_reason.get(key, 0) + 1
    report = PrepareReport(
        input_path=str(data_path),
        input_sha256=input_sha256,
        lines_read=result.lines_read,
        blank_lines=result.blank_lines,
        pairs_read=len(result.pairs),
        malformed=len(result.problems),
        malformed_by_reason=by_reason,
        malformed_lines=[str(p) for p in result.problems[:MAX_PROBLEMS_SHOWN]],
        duplicates_dropped=duplicates,
        clipped=result.clipped,
        pairs_kept=len(kept),
        split_pairs={s: len(getattr(splits, s)) for s in SPLITS},
        split_sources={s: len({p.src for p in getattr(splits, s)}) for s in SPLITS},
        length_stats={
            config.data.src_lang: _length_stats([len(x) for x in src_tok.encode([p.src for p in splits.train])]),
            config.data.tgt_lang: _length_stats([len(x) for x in tgt_tok.encode([p.tgt for p in splits.train])]),
        },
        vocab_sizes={config.data.src_lang: src_tok.vocab_size, config.data.tgt_lang: tgt_tok.vocab_size},
    )
    write_text_atomic(paths.report, json.dumps(asdict(report), indent=2, ensure_ascii=False))
    write_text_atomic(paths.root / "report.txt", report.summary() + "\n")
    write_text_atomic(paths.manifest, json.dumps({"fingerprint": fingerprint}, indent=2))
    return report
