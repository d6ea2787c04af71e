"""``nmt prepare``: a TSV file, or line-aligned files (``nmt.data.sources``) -> cleaned text files
split into train/dev/test (or with dev/test as given) + SentencePiece model(s).

The prepared folder's layout is ``nmt.paths.PreparedPaths``.
"""

from __future__ import annotations

import hashlib
import json
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path

from nmt.config import Config
from nmt.data.pairs import Pair, ReadResult, drop_duplicates
from nmt.data.references import write_references
from nmt.data.shards import write_shard
from nmt.data.sources import Corpus, describe, input_files, read_corpus
from nmt.data.split import Splits, group_references, split_by_source
from nmt.errors import NmtError
from nmt.fileio import sha256_file, write_lines_atomic, write_text_atomic
from nmt.fonts import missing_font_warning, missing_scripts
from nmt.paths import SPLITS, PreparedPaths, prepared_paths
from nmt.tokenizer import Tokenizer, train_sentencepiece

FORMAT_VERSION = 3  # 3: token-id shards
MAX_PROBLEMS_SHOWN = 10
# what a file that is mostly malformed was expected to hold, by kind
TSV = "an Anki/Tatoeba TSV file (source<TAB>target per line)"
LINES = "line-aligned text files (one sentence per line, line i of each file the same pair)"


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
    header: str = ""  # the TSV's first line, skipped because it named the columns
    given_sets: dict[str, str] = field(default_factory=dict)  # dev/test read from files: split -> files
    sources_also_in_train: dict[str, int] = field(default_factory=dict)  # given sets' sources seen in training
    scripts_without_font: dict[str, str] = field(default_factory=dict)  # script -> example character
    reused: bool = False

    def summary(self) -> str:
        lines = [
            f"Read {self.lines_read} lines from {self.input_path}: {self.pairs_read} pairs, "
            f"{self.blank_lines} blank, {self.malformed} malformed (skipped).",
        ]
        if self.header:
            lines.append(f"Skipped the header row {self.header!r} (data.header).")
        for reason, count in sorted(self.malformed_by_reason.items()):
            lines.append(f"  {count} x {reason}")
        if self.clipped:
            lines.append(f"Clipped {self.clipped} pair(s) with a sentence longer than data.max_chars.")
        lines.append(f"Dropped {self.duplicates_dropped} exact duplicate pairs; kept {self.pairs_kept}.")
        for split in SPLITS:
            given = f" (given: {self.given_sets[split]})" if split in self.given_sets else ""
            pairs, sources = self.split_pairs[split], self.split_sources[split]
            lines.append(f"  {split:5s}: {pairs:6d} pairs, {sources:6d} distinct sources{given}")
        for side, stats in self.length_stats.items():
            lines.append(
                f"  {side} length in subwords (train): mean {stats['mean']:.1f}, "
                f"median {stats['median']:.0f}, p95 {stats['p95']:.0f}, max {stats['max']:.0f}"
            )
        lines.append(f"  vocabulary sizes: {self.vocab_sizes}")
        lines += [f"  warning: {warning}" for warning in self.warnings()]
        return "\n".join(lines)

    def warnings(self) -> list[str]:
        """What the user should know about the data: given test sentences seen in training, scripts without a font."""
        warnings = [
            f"{count} {split} source sentence(s) of {self.given_sets[split]} also occur in the training data: "
            "its scores will flatter the model."
            for split, count in self.sources_also_in_train.items()
            if count
        ]
        if self.scripts_without_font:
            warnings.append(missing_font_warning(self.scripts_without_font))
        return warnings


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


def _write_splits(paths: PreparedPaths, splits: Splits, references: dict[str, list[tuple[str, list[str]]]]) -> None:
    for split in SPLITS:
        pairs: list[Pair] = getattr(splits, split)
        write_lines_atomic(paths.text(split, "src"), (p.src for p in pairs))
        write_lines_atomic(paths.text(split, "tgt"), (p.tgt for p in pairs))
        write_lines_atomic(paths.attribution(split), (p.attribution for p in pairs))
    for split, rows in references.items():
        write_references(paths.multi(split), rows)


def _write_shards(paths: PreparedPaths, splits: Splits, src_tok: Tokenizer, tgt_tok: Tokenizer) -> None:
    """Every split's sentences as token ids, encoded once: training reads them memory-mapped."""
    for split in SPLITS:
        pairs: list[Pair] = getattr(splits, split)
        write_shard(paths.ids(split, "src"), src_tok.encode([p.src for p in pairs]))
        write_shard(paths.ids(split, "tgt"), tgt_tok.encode([p.tgt for p in pairs]))


def load_report(paths: PreparedPaths) -> dict:
    with open(paths.report, encoding="utf-8") as handle:
        return json.load(handle)


def is_prepared(config: Config) -> bool:
    paths = prepared_paths(config)
    return all(p.is_file() for p in paths.outputs())


def prepare(config: Config, force: bool = False, log=print) -> PrepareReport:
    """Read, clean, split and tokenize the config's data into the prepared directory."""
    paths = prepared_paths(config)
    input_sha256 = _sha256_of(input_files(config.data))
    fingerprint = _fingerprint(config, input_sha256)
    reused = _reusable_report(config, paths, fingerprint, force)
    if reused is not None:
        return reused
    corpus = read_corpus(config.data, paths.root / "source")
    _check_problems(corpus.train, corpus.train_path, config.data.on_malformed, log, TSV if config.data.path else LINES)
    for given in corpus.given.values():
        _check_problems(given.read, given.files[0], config.data.on_malformed, log, LINES)
    pairs = corpus.train.pairs[: config.data.max_pairs] if config.data.max_pairs else corpus.train.pairs
    kept, duplicates = drop_duplicates(pairs)
    splits, references = _split(config, kept, corpus)

    paths.root.mkdir(parents=True, exist_ok=True)
    write_lines_atomic(paths.problems, (str(p) for p in corpus.problems))
    _write_splits(paths, splits, references)
    src_tok, tgt_tok = _train_tokenizers(config, paths, splits)
    _write_shards(paths, splits, src_tok, tgt_tok)
    report = _report(config, input_sha256, corpus, kept, duplicates, splits, src_tok, tgt_tok)
    for warning in report.warnings():
        log(f"warning: {warning}")
    write_text_atomic(paths.report, json.dumps(asdict(report), indent=2, ensure_ascii=False))
    write_text_atomic(paths.report_text, report.summary() + "\n")
    write_text_atomic(paths.manifest, json.dumps({"fingerprint": fingerprint}, indent=2))  # last: marks it complete
    return report


def _sha256_of(files: list[Path]) -> str:
    """One file's sha256 (an Anki TSV's, as before), or the sha256 of several files' in order."""
    hashes = [sha256_file(path) for path in files]
    return hashes[0] if len(hashes) == 1 else hashlib.sha256("".join(hashes).encode()).hexdigest()


def _split(config: Config, kept: list[Pair], corpus: Corpus) -> tuple[Splits, dict[str, list[tuple[str, list[str]]]]]:
    """Carve the dev/test sets that were not given out of the training pairs (by source sentence);
    take the given ones as they are. Returns the splits and each dev/test set's references."""
    data = config.data
    carved = [split for split in ("dev", "test") if split not in corpus.given]
    if carved and len({p.src for p in kept}) < 1 + len(carved):
        raise NmtError(
            f"{describe(data)} holds {len(kept)} usable pair(s): too few to split into train, {' and '.join(carved)}."
        )
    if not kept:
        raise NmtError(f"{describe(data)} holds no usable sentence pair to train on.")
    splits = split_by_source(
        kept,
        data.dev_size if "dev" in carved else 0,
        data.test_size if "test" in carved else 0,
        data.split_seed,
        data.max_carved,
    )
    references = {split: group_references(getattr(splits, split)) for split in carved}
    for split, given in corpus.given.items():
        if not given.rows:
            raise NmtError(f"data.{split} holds no usable sentence pair.")
        setattr(splits, split, given.read.pairs)
        references[split] = given.rows
    return splits, {split: references[split] for split in ("dev", "test")}


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


def _check_problems(result: ReadResult, data_path: Path, on_malformed: str, log, expected: str) -> None:
    """Refuse a file that is not sentence pairs, or any malformed line with on_malformed=error;
    otherwise show the first few skipped lines."""
    content_lines = result.lines_read - result.blank_lines
    if content_lines == 0:
        raise NmtError(f"{data_path} is empty: no sentence pairs to prepare.")
    if len(result.problems) > content_lines / 2:
        shown = "\n".join(f"  {p}" for p in result.problems[:3])
        raise NmtError(
            f"{data_path} does not look like {expected}: "
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
    """One SentencePiece model per language, or (tokenizer.joint) one trained on both sides."""
    tok = config.tokenizer
    sides = {"src": [p.src for p in splits.train], "tgt": [p.tgt for p in splits.train]}
    if tok.joint:
        sentences = sides["src"] + sides["tgt"]
        train_sentencepiece(sentences, paths.spm("src"), tok.src_vocab_size, tok.model_type, tok.character_coverage)
    else:
        for side, vocab_size in (("src", tok.src_vocab_size), ("tgt", tok.tgt_vocab_size)):
            train_sentencepiece(sides[side], paths.spm(side), vocab_size, tok.model_type, tok.character_coverage)
    return Tokenizer(paths.spm("src")), Tokenizer(paths.spm("tgt"))


def _report(
    config: Config,
    input_sha256: str,
    corpus: Corpus,
    kept: list[Pair],
    duplicates: int,
    splits: Splits,
    src_tok: Tokenizer,
    tgt_tok: Tokenizer,
) -> PrepareReport:
    result, data = corpus.train, config.data
    problems = corpus.problems
    by_reason: dict[str, int] = {}
    for problem in problems:
        key = problem.reason.split(" at byte")[0]
        by_reason[key] = by_reason.get(key, 0) + 1
    train_sources = {p.src for p in splits.train}
    given_sets = {split: " + ".join(map(str, given.files)) for split, given in corpus.given.items()}
    every_text = [text for p in splits.train for text in (p.src, p.tgt)]
    return PrepareReport(
        input_path=str(corpus.train_path) if data.path else describe(data),
        input_sha256=input_sha256,
        lines_read=result.lines_read,
        blank_lines=result.blank_lines,
        pairs_read=len(result.pairs),
        malformed=len(problems),
        malformed_by_reason=by_reason,
        malformed_lines=[str(p) for p in problems[:MAX_PROBLEMS_SHOWN]],
        duplicates_dropped=duplicates,
        clipped=result.clipped,
        pairs_kept=len(kept),
        split_pairs={s: len(getattr(splits, s)) for s in SPLITS},
        split_sources={s: len({p.src for p in getattr(splits, s)}) for s in SPLITS},
        length_stats={
            data.src_lang: _length_stats([len(x) for x in src_tok.encode([p.src for p in splits.train])]),
            data.tgt_lang: _length_stats([len(x) for x in tgt_tok.encode([p.tgt for p in splits.train])]),
        },
        vocab_sizes={data.src_lang: src_tok.vocab_size, data.tgt_lang: tgt_tok.vocab_size},
        header=result.header,
        given_sets=given_sets,
        sources_also_in_train={
            split: len({src for src, _ in given.rows} & train_sources) for split, given in corpus.given.items()
        },
        scripts_without_font=missing_scripts(every_text),
    )
