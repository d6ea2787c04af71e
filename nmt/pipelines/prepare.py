"""``nmt prepare``: a TSV file, or line-aligned files (``nmt.data.sources``) -> cleaned text files
split into train/dev/test (or with dev/test as given), SentencePiece model(s), and every
split's token ids as memory-mapped shards.

The training corpus is read in passes and never held (``nmt.data.streaming``): memory stays
flat from a thousand pairs to millions. The prepared folder's layout is ``nmt.config.paths.PreparedPaths``.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import yaml

from nmt.config.paths import SPLITS, PreparedPaths, prepared_paths, refuse_linked_prepared_dir, run_paths
from nmt.config.schema import Config
from nmt.core.errors import NmtError
from nmt.core.fileio import (
    atomic_text_writer,
    count_lines,
    remove_temporaries,
    sha256_file,
    write_lines_atomic,
    write_text_atomic,
)
from nmt.core.fonts import missing_font_warning, missing_scripts
from nmt.core.locking import holding
from nmt.core.progress import progress_bar
from nmt.data.pairs import LINES, MAX_PROBLEMS_SHOWN, TSV, Pair, ReadResult, check_read
from nmt.data.profile import length_stats
from nmt.data.references import write_references
from nmt.data.related import RelatedMix, mix_related, source_tag, symbols
from nmt.data.shards import write_shard
from nmt.data.sources import Corpus, describe, input_files, read_corpus
from nmt.data.split import check_enough_sources
from nmt.data.streaming import Distribution, Survey, carve, carved_references, distribute, survey
from nmt.data.tokenizer import Tokenizer, encoded_lines, train_sentencepiece
from nmt.pipelines.distill import distill_training_targets, teacher_sha256
from nmt.runtime.checkpoint import model_differences
from nmt.runtime.loading import load_tokenizers
from nmt.runtime.parent import Parent, child_tokenizers, load_parent, related_child_tokenizers

# 3: token-id shards; 4: shards written as they are encoded; 5: every data key in the fingerprint
FORMAT_VERSION = 5


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
    tokenizer_pairs: int = 0  # training pairs SentencePiece learned from (a seeded sample of a large corpus)
    added_pairs: int = 0  # training pairs a teacher added (self-training, distill: add): not learned by the tokenizers
    lone_cr: int = 0  # line breaks that were a lone carriage return, read as line breaks
    vocabulary_notes: list[str] = field(default_factory=list)  # vocabularies smaller than asked, and why
    related: dict = field(default_factory=dict)  # data.related: what was mixed in (nmt.data.related.RelatedMix)
    reused: bool = False

    def summary(self) -> str:
        lines = [
            f"Read {self.lines_read} lines from {self.input_path}: {self.pairs_read} pairs, "
            f"{self.blank_lines} blank, {self.malformed} malformed (skipped).",
        ]
        if self.header:
            lines.append(f"Skipped the header row {self.header!r} (data.header).")
        if self.lone_cr:
            lines.append(
                f"Read {self.lone_cr} carriage return(s) without a line feed (CR) as line breaks; "
                "line numbers count them."
            )
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
        own_pairs = self.split_pairs["train"] - self.added_pairs
        added = f", not from the {self.added_pairs:,} a teacher added" if self.added_pairs else ""
        if self.tokenizer_pairs < own_pairs:
            lines.append(
                f"  SentencePiece learned from a seeded sample of {self.tokenizer_pairs:,} of the {own_pairs:,} "
                f"training pairs (tokenizer.sample_pairs){added}."
            )
        elif added:
            lines.append(f"  SentencePiece learned from the split's {self.tokenizer_pairs:,} training pairs{added}.")
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
        return warnings + self.vocabulary_notes


def _fingerprint(config: Config, input_sha256: str, parent: Parent | None) -> str:
    data = {k: v for k, v in asdict(config.data).items() if k != "prepared_dir"}
    data["links"] = ""  # read by training, never prepared: a run prepared without them is theirs too
    payload = {
        "format": FORMAT_VERSION,
        "input_sha256": input_sha256,
        "data": data,
        "tokenizer": asdict(config.tokenizer),
        # a parent's tokenizers decide the child's: another parent, another preparation
        "parent_spm": [parent.src_tok.sha256, parent.tgt_tok.sha256] if parent else None,
    }
    if parent and config.data.related:  # the parent's tokenizers extended (before: new ones)
        payload["related_vocab"] = "parent-extended"
    if config.data.distill_from:
        payload["teacher_sha256"] = teacher_sha256(config)  # another teacher, other training targets
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode("utf-8")).hexdigest()


def refuse_over_checkpoints(config: Config, what_changes: str) -> None:
    """Refuse, before anything is written, a change that would leave a trained run's checkpoints
    unable to translate (they were trained with its tokenizers and its model settings)."""
    checkpoints = run_paths(config).trained_checkpoints()
    if checkpoints:
        raise NmtError(
            f"{config.run_dir} holds a trained model ({checkpoints[0]}), and {what_changes}: its checkpoints would no "
            "longer match them. Nothing was changed. Choose another run_dir (--set run_dir=...), or pass "
            "`nmt prepare --force` to prepare again anyway (the trained model is then of no use)."
        )


def changed_model_settings(config: Config) -> list[str]:
    """How ``config``'s model settings differ from those of the run's saved config.yaml."""
    saved = run_paths(config).config
    if not saved.is_file():
        return []
    with open(saved, encoding="utf-8") as handle:
        raw = yaml.safe_load(handle)
    saved_model = raw.get("model", {}) if isinstance(raw, dict) and isinstance(raw.get("model"), dict) else {}
    return model_differences(saved_model, config.model, "model.")


def load_report(paths: PreparedPaths) -> dict:
    with open(paths.report, encoding="utf-8") as handle:
        return json.load(handle)


def is_prepared(config: Config) -> bool:
    paths = prepared_paths(config)
    return all(p.is_file() for p in paths.outputs())


def prepare(config: Config, force: bool = False, log=print, show_bar: bool = True) -> PrepareReport:
    """Read, clean, split and tokenize the config's data into the prepared directory.
    ``show_bar``: progress bars (lines per second) on a terminal."""
    refuse_linked_prepared_dir(config)
    paths = prepared_paths(config)
    with holding(paths.root, "nmt prepare", create=False):
        _remove_leftovers(paths, log)
        return _prepare(config, paths, force, log, show_bar)


SCRATCH_PREFIX = ".prepare-"  # the scratch folder of passes 1 and 2, inside the prepared folder


def _remove_leftovers(paths: PreparedPaths, log) -> None:
    """What a prepare that was killed left behind: its scratch folders and half-written files."""
    if not paths.root.is_dir():
        return
    scratch = [path for path in paths.root.glob(f"{SCRATCH_PREFIX}*") if path.is_dir() and not path.is_symlink()]
    for folder in scratch:
        shutil.rmtree(folder, ignore_errors=True)
    files = remove_temporaries(paths.root)
    if scratch or files:
        log(
            f"Removed what an interrupted prepare left in {paths.root}: "
            f"{len(scratch)} scratch folder(s), {files} file(s)."
        )


def _prepare(config: Config, paths: PreparedPaths, force: bool, log, show_bar: bool) -> PrepareReport:
    parent = load_parent(config.init_from) if config.init_from else None  # refused before anything is written
    input_sha256 = _sha256_of(input_files(config.data))
    fingerprint = _fingerprint(config, input_sha256, parent)
    reused = _reusable_report(config, paths, fingerprint, force, log)
    if reused is not None:
        return reused
    if not force and paths.manifest.is_file():
        refuse_over_checkpoints(config, "its prepared data and tokenizers would be rebuilt")
    corpus = read_corpus(config.data, paths.root / "source")
    created = not paths.root.exists()
    paths.root.mkdir(parents=True, exist_ok=True)
    try:
        with tempfile.TemporaryDirectory(dir=paths.root, prefix=SCRATCH_PREFIX) as scratch:
            found, distribution = _split_corpus(config, corpus, paths, Path(scratch), log, show_bar)
    except BaseException:
        if created and not any(paths.root.iterdir()):
            paths.root.rmdir()  # a refused corpus leaves nothing behind
        raise
    split_train_pairs = distribution.split_pairs["train"]
    mix = _training_text(config, paths, distribution, log, show_bar)
    if (
        parent is not None
        and mix is not None
        and related_child_tokenizers(config, paths, parent, distribution.sample, symbols(config.data), log)
    ):  # several targets from a parent of one of them: its tokenizers, extended
        src_tok, tgt_tok = load_tokenizers(config)
        notes = []
    elif parent is None or mix is not None:  # several targets: tokenizers of their own, with the tags
        src_tok, tgt_tok = _train_tokenizers(config, paths, distribution.sample, mix)
        notes = vocabulary_notes(config, src_tok, tgt_tok)
        related = f" and {len(mix.src_sample):,} related ones" if mix is not None else ""
        log(f"SentencePiece trained on {len(distribution.sample):,} training pairs{related}; encoding the splits.")
    else:
        log(f"Tokenizers from the parent {parent.path} where they fit ({len(distribution.sample):,} pairs measured):")
        child_tokenizers(config, paths, parent, distribution.sample, log)
        src_tok, tgt_tok = load_tokenizers(config)
        notes = []
    lengths = _write_shards(paths, distribution.split_pairs, src_tok, tgt_tok, show_bar, source_tag(config.data))
    report = _report(config, input_sha256, corpus, found, distribution, lengths, src_tok, tgt_tok)
    report.vocabulary_notes = notes
    if mix is not None:
        report.related = {**asdict(mix), "src_sample": len(mix.src_sample), "tgt_sample": len(mix.tgt_sample)}
        report.tokenizer_pairs += len(mix.src_sample)  # the related corpora's share of the tokenizers' sample
    else:  # (with related corpora every pair is in the mix, and the summary reports the mix's sample)
        report.added_pairs = distribution.split_pairs["train"] - split_train_pairs
    for warning in report.warnings():
        log(f"warning: {warning}")
    write_text_atomic(paths.report, json.dumps(asdict(report), indent=2, ensure_ascii=False))
    write_text_atomic(paths.report_text, report.summary() + "\n")
    manifest = {"format": FORMAT_VERSION, "fingerprint": fingerprint}
    write_text_atomic(paths.manifest, json.dumps(manifest, indent=2))  # last: marks it complete
    return report


def _split_corpus(
    config: Config, corpus: Corpus, paths: PreparedPaths, scratch: Path, log, show_bar: bool
) -> tuple[Survey, Distribution]:
    """Passes 1 and 2 over the training data: survey it, check it, then write the split text
    files (and problems.txt, the given sets and the references)."""
    data = config.data
    total_lines = count_lines(corpus.train_path)
    with (
        open(scratch / "problems.txt", "w", encoding="utf-8", newline="\n") as spill,
        _bar(total_lines, "reading", show_bar) as bar,
    ):
        result = ReadResult(keep_problems=MAX_PROBLEMS_SHOWN, on_problem=lambda problem: spill.write(f"{problem}\n"))
        found = survey(corpus, scratch, result, bar)
    expected = TSV if data.path else LINES
    check_read(result, corpus.train_path, expected, data.on_malformed, log, listed_in=paths.problems.name)
    for given in corpus.given.values():
        check_read(given.read, given.files[0], LINES, data.on_malformed, log)
    carved = [split for split in ("dev", "test") if split not in corpus.given]
    check_enough_sources(found.n_sources, found.distinct_pairs, carved, describe(data))
    if not found.distinct_pairs:
        raise NmtError(f"{describe(data)} holds no usable sentence pair to train on.")
    for split, given in corpus.given.items():
        if not given.rows:
            raise NmtError(f"data.{split} holds no usable sentence pair.")
    split_of = carve(found, data, carved)
    with _bar(total_lines, "splitting", show_bar) as bar:
        distribution = distribute(corpus, found, split_of, carved, paths, config.tokenizer.sample_pairs, bar)
    references = carved_references(distribution)
    for split, given in corpus.given.items():
        _write_given(paths, split, given.read.pairs)
        references[split] = given.rows
        distribution.split_pairs[split] = len(given.read.pairs)
    for split in ("dev", "test"):
        write_references(paths.multi(split), references[split])
    with atomic_text_writer(paths.problems) as out, open(scratch / "problems.txt", encoding="utf-8") as spilled:
        shutil.copyfileobj(spilled, out)
        out.writelines(f"{problem}\n" for problem in corpus.given_problems)
    return found, distribution


def _training_text(
    config: Config, paths: PreparedPaths, distribution: Distribution, log, show_bar: bool
) -> RelatedMix | None:
    """The training text beyond the split's: a teacher's translations (data.distill_from, and
    data.synthetic_from's sentences), then the related corpora (data.related), every source
    tagged."""
    if config.data.distill_from:
        distribution.split_pairs["train"] = distill_training_targets(config, paths, log, show_bar)
    if not config.data.related:
        return None
    mix = mix_related(config.data, paths, len(distribution.sample), paths.root / "source", log)
    distribution.split_pairs["train"] = mix.train_pairs
    log(_related_summary(config, mix))
    return mix


def _related_summary(config: Config, mix: RelatedMix) -> str:
    data = config.data
    kept = ", ".join(f"{mix.pairs[lang]:,} {lang}" for lang in data.related)
    held = sum(mix.held_out.values())
    return (
        f"Related corpora: {kept} pairs beside this pair's, {data.oversample} time(s) over, every source led by its "
        f"target's tag; {held:,} related pair(s) left out (their source is a dev/test source here); "
        f"{mix.test_sources_in_related:,} of the test sources also occur in a related corpus."
    )


def _bar(total: int, what: str, show: bool):
    return progress_bar(total, f"prepare: {what}", " lines", show, unit_scale=True)


def _write_given(paths: PreparedPaths, split: str, pairs: list[Pair]) -> None:
    write_lines_atomic(paths.text(split, "src"), (p.src for p in pairs))
    write_lines_atomic(paths.text(split, "tgt"), (p.tgt for p in pairs))
    write_lines_atomic(paths.attribution(split), (p.attribution for p in pairs))


def _write_shards(
    paths: PreparedPaths,
    split_pairs: dict[str, int],
    src_tok: Tokenizer,
    tgt_tok: Tokenizer,
    show_bar: bool,
    tag: str | None = None,
) -> dict[str, np.ndarray]:
    """Pass 3: every split's sentences as token ids, encoded once from the written text files;
    training reads them memory-mapped. Returns the training sentences' lengths per side. A model
    of several targets has its training sources tagged in the text; dev and test sources get
    ``tag`` (the pair's target) as they are encoded."""
    lengths = {}
    with _bar(2 * sum(split_pairs.values()), "encoding", show_bar) as bar:
        for split in SPLITS:
            for side, tokenizer in (("src", src_tok), ("tgt", tgt_tok)):
                lead = tag if side == "src" and split != "train" else None
                ids = encoded_lines(tokenizer, paths.text(split, side), bar, tag=lead)
                lengths[split, side] = write_shard(paths.ids(split, side), ids, tokenizer.vocab_size)
    return {"src": lengths["train", "src"], "tgt": lengths["train", "tgt"]}


def _sha256_of(files: list[Path]) -> str:
    """One file's sha256 (an Anki TSV's, as before), or the sha256 of several files' in order."""
    hashes = [sha256_file(path) for path in files]
    return hashes[0] if len(hashes) == 1 else hashlib.sha256("".join(hashes).encode()).hexdigest()


def _reusable_report(
    config: Config, paths: PreparedPaths, fingerprint: str, force: bool, log=print
) -> PrepareReport | None:
    """The report of an earlier prepare with the same inputs and settings, if it is complete. Data
    an earlier format prepared cannot be compared; it is reused as it is where a trained model
    depends on it (its tokenizers are the checkpoints' own), and prepared again where none does."""
    if force or not is_prepared(config):
        return None
    with open(paths.manifest, encoding="utf-8") as handle:
        manifest = json.load(handle)
    if manifest.get("format", 4) < FORMAT_VERSION and run_paths(config).trained_checkpoints():
        log(
            f"{paths.root} was prepared by an earlier version of nmt (format {manifest.get('format', 4)}); a trained "
            "model depends on it, so it is reused as it is (nmt prepare --force prepares it again)."
        )
    elif manifest.get("fingerprint") != fingerprint:
        return None
    report = PrepareReport(**load_report(paths))
    report.reused = True
    return report


def _train_tokenizers(
    config: Config, paths: PreparedPaths, sample: list[Pair], mix: RelatedMix | None = None
) -> tuple[Tokenizer, Tokenizer]:
    """One SentencePiece model per language, or (tokenizer.joint) one trained on both sides,
    learned from the sample of training pairs (and a related corpus's balanced sample; the
    source's has the target tags as pieces of their own)."""
    tok = config.tokenizer
    sides = {"src": [p.src for p in sample], "tgt": [p.tgt for p in sample]}
    if mix is not None:
        sides["src"] += mix.src_sample
        sides["tgt"] += mix.tgt_sample
    tags = symbols(config.data)
    codes = {"src": [tok.src_code] if tok.src_code else [], "tgt": [tok.tgt_code] if tok.tgt_code else []}
    if tok.joint:
        sentences = sides["src"] + sides["tgt"]
        key = "tokenizer.src_vocab_size"
        joint_symbols = tags + codes["src"] + [code for code in codes["tgt"] if code not in codes["src"]]
        train_sentencepiece(
            sentences, paths.spm("src"), tok.src_vocab_size, tok.model_type, tok.character_coverage, joint_symbols, key
        )
    else:
        for side, vocab_size in (("src", tok.src_vocab_size), ("tgt", tok.tgt_vocab_size)):
            side_tags = (tags if side == "src" else []) + codes[side]  # the language code: a piece of its own
            key = f"tokenizer.{side}_vocab_size"
            train_sentencepiece(
                sides[side], paths.spm(side), vocab_size, tok.model_type, tok.character_coverage, side_tags, key
            )
    return load_tokenizers(config)


def vocabulary_notes(config: Config, src_tok: Tokenizer, tgt_tok: Tokenizer) -> list[str]:
    """Where a vocabulary came out smaller than the config asks, and why: SentencePiece stops where
    the training text has no more pieces worth one (a small corpus), and the model is built for
    the pieces there are."""
    tok = config.tokenizer
    asked = {"src": tok.src_vocab_size, "tgt": tok.tgt_vocab_size}
    found = {"src": src_tok.vocab_size, "tgt": tgt_tok.vocab_size}
    return [
        f"tokenizer.{side}_vocab_size asks for {asked[side]:,} pieces; the training text yields {found[side]:,} "
        "(too few distinct words and parts of words for more): the model uses those."
        for side in ("src", "tgt")
        if found[side] < asked[side] and not (tok.joint and side == "tgt")
    ]


def _report(
    config: Config,
    input_sha256: str,
    corpus: Corpus,
    found: Survey,
    distribution: Distribution,
    lengths: dict[str, np.ndarray],
    src_tok: Tokenizer,
    tgt_tok: Tokenizer,
) -> PrepareReport:
    result, data = found.result, config.data
    given_problems = corpus.given_problems
    by_reason = dict(result.problems_by_kind)
    for problem in given_problems:
        by_reason[problem.kind] = by_reason.get(problem.kind, 0) + 1
    carved_sources = {split: len({p.src for p in pairs}) for split, pairs in distribution.carved.items()}
    given_sources = {split: len({src for src, _ in given.rows}) for split, given in corpus.given.items()}
    return PrepareReport(
        input_path=str(corpus.train_path) if data.path else describe(data),
        input_sha256=input_sha256,
        lines_read=result.lines_read,
        blank_lines=result.blank_lines,
        lone_cr=result.lone_cr,
        pairs_read=result.pairs_read,
        malformed=result.problem_count + len(given_problems),
        malformed_by_reason=by_reason,
        malformed_lines=[str(p) for p in [*result.problems, *given_problems][:MAX_PROBLEMS_SHOWN]],
        duplicates_dropped=distribution.duplicates_dropped,
        clipped=result.clipped,
        pairs_kept=found.distinct_pairs,
        split_pairs={s: distribution.split_pairs[s] for s in SPLITS},
        split_sources={"train": found.n_sources - sum(carved_sources.values()), **carved_sources, **given_sources},
        length_stats={data.src_lang: length_stats(lengths["src"]), data.tgt_lang: length_stats(lengths["tgt"])},
        vocab_sizes={data.src_lang: src_tok.vocab_size, data.tgt_lang: tgt_tok.vocab_size},
        header=result.header,
        given_sets={split: " + ".join(map(str, given.files)) for split, given in corpus.given.items()},
        sources_also_in_train=distribution.given_seen,
        scripts_without_font=missing_scripts(distribution.characters),
        tokenizer_pairs=len(distribution.sample),
    )
