"""``nmt prepare``: TSV -> cleaned, split text files + one SentencePiece model per language.

The prepared folder's layout is ``nmt.paths.PreparedPaths``.
"""

from __future__ import annotations

import hashlib
import json
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path

from nmt.config import Config
from nmt.data.anki import Pair, ReadResult, drop_duplicates, read_anki
from nmt.data.references import write_references
from nmt.data.split import Splits, group_references, split_by_source
from nmt.errors import NmtError
from nmt.fileio import sha256_file, write_lines_atomic, write_text_atomic
from nmt.paths import SPLITS, PreparedPaths, prepared_paths
from nmt.tokenizer import Tokenizer, train_sentencepiece

FORMAT_VERSION = 2
MAX_PROBLEMS_SHOWN = 10


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
        write_lines_atomic(paths.attribution(split), (p.attribution for p in pairs))
    for split in ("dev", "test"):
        write_references(paths.multi(split), group_references(getattr(splits, split)))


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
    reused = _reusable_report(config, paths, fingerprint, force)
    if reused is not None:
        return reused
    if data_path.suffix.lower() == ".zip":  # an Anki archive: verify, unpack, read its pairs
        from nmt.data.download import unpack

        data_path = unpack(data_path, paths.root / "source")
    result = read_anki(data_path, config.data.max_chars)
    _check_problems(result, data_path, config.data.on_malformed, log)
    pairs = result.pairs[: config.data.max_pairs] if config.data.max_pairs else result.pairs
    kept, duplicates = drop_duplicates(pairs)
    if len({p.src for p in kept}) < 3:
        raise NmtError(f"{data_path} holds {len(kept)} usable pair(s): too few to split into train, dev and test.")
    splits = split_by_source(kept, config.data.dev_size, config.data.test_size, config.data.split_seed)

    paths.root.mkdir(parents=True, exist_ok=True)
    write_lines_atomic(paths.problems, (str(p) for p in result.problems))
    _write_splits(paths, splits)
    src_tok, tgt_tok = _train_tokenizers(config, paths, splits)
    report = _report(config, data_path, input_sha256, result, kept, duplicates, splits, src_tok, tgt_tok)
    write_text_atomic(paths.report, json.dumps(asdict(report), indent=2, ensure_ascii=False))
    write_text_atomic(paths.report_text, report.summary() + "\n")
    write_text_atomic(paths.manifest, json.dumps({"fingerprint": fingerprint}, indent=2))  # last: marks it complete
    return report


def _reusable_report(config: Config, paths: PreparedPaths, fingerprint: str, force: bool) -> PrepareReport | None:
    """The report of an earlier prepare with the same inputs and settings, if it is complete."""
    if force or not is_prepared(config):
        return None
    with open(paths.manifest, encoding="utf-8") as handle:
        if json.load(handle).get("fingerprint") != fingerprint:
            return None
    report = PrepareReport(**load_report(paths))
    report.reused = True
    return report


def _check_problems(result: ReadResult, data_path: Path, on_malformed: str, log) -> None:
    """Refuse a file that is not sentence pairs, or any malformed line with on_malformed=error;
    otherwise show the first few skipped lines."""
    content_lines = result.lines_read - result.blank_lines
    if content_lines == 0:
        raise NmtError(f"{data_path} is empty: no sentence pairs to prepare.")
    if len(result.problems) > content_lines / 2:
        shown = "\n".join(f"  {p}" for p in result.problems[:3])
        raise NmtError(
            f"{data_path} does not look like an Anki/Tatoeba TSV file (source<TAB>target per line): "
            f"{len(result.problems)} of {content_lines} lines are malformed, e.g.\n{shown}"
        )
    if result.problems and on_malformed == "error":
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


def _train_tokenizers(config: Config, paths: PreparedPaths, splits: Splits) -> tuple[Tokenizer, Tokenizer]:
    tok = config.tokenizer
    for side, vocab_size in (("src", tok.src_vocab_size), ("tgt", tok.tgt_vocab_size)):
        sentences = [getattr(p, side) for p in splits.train]
        train_sentencepiece(sentences, paths.spm(side), vocab_size, tok.model_type, tok.character_coverage)
    return Tokenizer(paths.spm("src")), Tokenizer(paths.spm("tgt"))


def _report(
    config: Config,
    data_path: Path,
    input_sha256: str,
    result: ReadResult,
    kept: list[Pair],
    duplicates: int,
    splits: Splits,
    src_tok: Tokenizer,
    tgt_tok: Tokenizer,
) -> PrepareReport:
    by_reason: dict[str, int] = {}
    for problem in result.problems:
        key = problem.reason.split(" at byte")[0]
        by_reason[key] = by_reason.get(key, 0) + 1
    return PrepareReport(
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
