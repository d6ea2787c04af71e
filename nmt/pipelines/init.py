"""``nmt init DATA``: a first config for a corpus, written from what the corpus is.

It reads the user's file(s) once — a TSV (Anki/Tatoeba export), an Anki zip, or two line-aligned
files — counts pairs, distinct sources and sentence lengths, finds each side's script, and
writes a commented config with the recipe measured for a corpus of that size on a CPU
(``RECIPES``; docs/quality.md, docs/transfer.md, docs/small-data.md), this machine's threads and
the time budget asked for. Where a corpus this checkout ships shares the target's script (the
eng-mar file for a Devanagari target), the config says how a model trained on it can be the
starting point. A malformed file is refused with its file and line, as ``nmt prepare`` would.
"""

from __future__ import annotations

import os
import re
import tempfile
import textwrap
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from nmt.core.errors import NmtError
from nmt.core.fileio import write_text_atomic
from nmt.core.fonts import script_of
from nmt.data.aligned import aligned_pairs
from nmt.data.download import tsv_file
from nmt.data.languages import LANGUAGES
from nmt.data.pairs import LINES, TSV, Pair, ReadResult, check_read
from nmt.data.split import carved_ranks, check_enough_sources
from nmt.data.tsv import tsv_pairs
from nmt.pipelines.prepare import length_stats

ROOT = Path(__file__).resolve().parents[2]  # a checkout: its shipped corpora
SHIPPED = {  # corpora a checkout ships, by target language: (file, its target's script, the config that trains on it)
    "mr": (ROOT / "data" / "eng-mar" / "mar.txt", "DEVANAGARI", "configs/eng-mar-cpu.yaml"),
}


WIDTHS = ("embed_dim", "encoder_hidden", "decoder_hidden", "attention_dim", "output_dim")


@dataclass(frozen=True)
class Recipe:
    """Settings measured together for corpora of up to ``max_pairs`` pairs (on a 2-core CPU)."""

    max_pairs: int
    name: str
    why: str  # the measurement it follows, for the config's comments
    vocab: int
    width: int
    dropout: float
    input_feeding: bool
    batch_size: int
    word_dropout: float = 0.0
    lexical_child: bool = False  # a child of a parent adds the lexical model (model.lexical)


RECIPES = (
    Recipe(
        5_000,
        "small-corpus",
        "configs/eng-hin-scratch.yaml: on 2,549 English-Hindi pairs input feeding won on both seeds "
        "(7.01 against 6.32 test BLEU in 5 minutes, docs/transfer.md); on eng-mar subsets it tied at "
        "1,000 and 2,500 pairs (two seeds) and won at 5,000 (two seeds): the learning curve of docs/small-data.md",
        vocab=2000,
        width=256,
        dropout=0.2,
        input_feeding=True,
        batch_size=64,
        lexical_child=True,
    ),
    Recipe(
        100_000,
        "CPU",
        "configs/eng-mar-cpu.yaml: 38.7 test BLEU on 33,725 English-Marathi pairs in 5 minutes (docs/quality.md)",
        vocab=2000,
        width=256,
        dropout=0.2,
        input_feeding=False,
        batch_size=64,
    ),
    Recipe(
        10**12,
        "large-corpus",
        "configs/eng-mar.yaml's widths and vocabularies for corpora past 100,000 pairs",
        vocab=8000,
        width=512,
        dropout=0.3,
        input_feeding=False,
        batch_size=128,
    ),
)


@dataclass
class Survey:
    """What ``nmt init`` found in the data."""

    files: list[Path]
    pairs: int = 0
    sources: int = 0  # distinct source sentences (a split keeps each in one split)
    problems: int = 0  # malformed lines (prepare skips them)
    header: str = ""
    src_words: list[int] = field(default_factory=list)
    tgt_words: list[int] = field(default_factory=list)
    src_scripts: Counter = field(default_factory=Counter)
    tgt_scripts: Counter = field(default_factory=Counter)

    def script(self, side: str) -> str:
        counts = self.src_scripts if side == "src" else self.tgt_scripts
        return counts.most_common(1)[0][0] if counts else "UNKNOWN"

    def describe(self, side: str, lang: str) -> str:
        """A side's script and sentence lengths in words (mean and 95th percentile, as prepare's
        report counts subwords)."""
        stats = length_stats(np.array(self.src_words if side == "src" else self.tgt_words))
        lengths = f"{stats['mean']:.1f} words a sentence (95 % up to {stats['p95']:.0f})"
        return f"{lang}: {self.script(side).lower()} script, {lengths}"


def language_of(name: str) -> str:
    """A language code from a file's name: ``hin.txt`` / ``hin-eng.zip`` -> hi (the first
    language named: Anki names its exports after the other language), ``train.mr`` -> mr."""
    suffix = Path(name).suffix.lower().lstrip(".")
    if suffix in LANGUAGES:
        return suffix
    for word in (w.lower() for w in re.split(r"[^A-Za-z]+", Path(name).stem) if w):
        for code, (full, others) in LANGUAGES.items():
            if word in others or word == full.lower():
                return code
    return ""


def survey(files: list[Path], unpack_dir: Path) -> Survey:
    """Read the corpus once: a TSV or Anki zip (one file) or line-aligned files (source, target)."""
    found = Survey(files)
    result = ReadResult(keep_problems=3)
    sources = set()
    for pair in _pairs(files, unpack_dir, result):
        found.pairs += 1
        sources.add(pair.src)
        found.src_words.append(len(pair.src.split()))
        found.tgt_words.append(len(pair.tgt.split()))
        if found.pairs <= 2000:  # the scripts of a sample
            found.src_scripts.update(_scripts(pair.src))
            found.tgt_scripts.update(_scripts(pair.tgt))
    found.sources, found.problems, found.header = len(sources), result.problem_count, result.header
    check_read(result, files[0], TSV if len(files) == 1 else LINES, log=lambda _: None)  # prepare's rule
    if not found.pairs:
        where = f": {result.problems[0]}" if result.problems else ""
        raise NmtError(f"{files[0]} holds no sentence pairs{where}.")
    check_enough_sources(found.sources, found.pairs, ["dev", "test"], str(files[0]))
    return found


def _pairs(files: list[Path], unpack_dir: Path, result: ReadResult) -> Iterator[Pair]:
    for path in files:
        if not path.is_file():
            raise NmtError(f"Data file not found: {path}")
    if len(files) == 2:
        for pairs in aligned_pairs("nmt init", files[0], [files[1]], 1000, result):
            yield from pairs
        return
    yield from tsv_pairs(tsv_file(files[0], unpack_dir), result)


def _scripts(text: str) -> Iterable[str]:
    return (script_of(char) for char in text if char.isalpha())


def recipe_for(pairs: int) -> Recipe:
    return next(recipe for recipe in RECIPES if pairs <= recipe.max_pairs)


# A small corpus's dev set: at most this many sources. Under the budget's schedule a run's last
# checkpoint scores as its best (docs/small-data.md, seventh measurement), so dev only watches the
# run, and each source it holds back is a training pair lost where pairs count most (the learning
# curve): 50 dev sources instead of 200 gave eng-hin's children +0.9 test BLEU (eighth measurement).
SMALL_DEV = 50


def split_sizes(sources: int) -> tuple[int, int]:
    """(dev, test) distinct sources: for a small corpus, about 8 % (at most ``SMALL_DEV``) and
    15 %; 5 % each of a large one; never fewer than 20 nor more than 2,000 — but a toy corpus,
    where 20 of each would hold back half of it, keeps 8 % and 15 %, at least one each. The
    split is checked by prepare's own rule, so a corpus too small to split is refused here,
    as ``nmt prepare`` would refuse it."""
    if sources < 10_000:
        dev, test = max(20, min(SMALL_DEV, round(0.08 * sources))), max(20, round(0.15 * sources))
        if dev + test > sources // 2:
            dev, test = max(1, round(0.08 * sources)), max(1, round(0.15 * sources))
    else:
        dev, test = min(2000, round(0.05 * sources)), min(2000, round(0.05 * sources))
    carved_ranks(sources, dev, test, seed=0)  # NmtError where it leaves nothing to train on
    return dev, test


# With a parent (configs/eng-hin.yaml against configs/eng-hin-mixed.yaml; docs/small-data.md, third,
# fifth, sixth and eighth measurements): the transfer with the lexical model, and the parent's own
# corpus as a related one offered in comments.
TRANSFER_MEASURED = (
    "English-Hindi (2,549 pairs) from the eng-mar model, four children with the lexical model ensembled, 5 minutes, "
    "four seeds: 11.15 test BLEU (10.27 with 200 dev sources instead of 50), against 9.63 for one such child, "
    "9.03 for one plain child and 6.0 from scratch (200 dev sources)"
)
# Children trained side by side and ensembled (MBR over 8), on a corpus small enough that each
# still trains past its best dev loss (about 13 epochs of 1,883 pairs) in a quarter of the
# machine: four children of 22 epochs each on eng-hin (sixth measurement). A corpus twice as
# large would give each fewer epochs than that in 5 minutes of 2 cores: not measured, one child.
CHILDREN = 4
CHILDREN_UP_TO_PAIRS = 2_500
CHILDREN_MEASURED = (
    "four children side by side, translating as one ensemble that picks the line the others agree with most "
    "(train.members: 4, decode.mbr: 8): 10.32 test BLEU against 9.63 for one child in the same 5 minutes "
    "(200 dev sources)"
)
LEXICAL_MEASURED = (
    "source words under the attention add their own term to the output, a shortcut a small corpus learns fast; "
    "+0.60 test BLEU and +2.07 chrF over three seeds, chrF higher on every seed, BLEU on two"
)
RELATED_DATA = {"oversample": 3}
RELATED_TRAIN = {"related_per_epoch": 3000, "related_until": 0.6}
# Without a parent (the learning curve of docs/small-data.md): the shipped corpus trained beside
# the user's from scratch, as the related-language line of the curve trains it.
SCRATCH_RELATED_DATA = {"oversample": 2}
SCRATCH_RELATED_MEASURED = (
    "on English-Marathi subsets beside the English-Hindi file it added 0.7, 2.0 and 2.4 test BLEU to the same "
    "recipe alone at 1,000, 2,500 and 5,000 pairs; on English-Hindi beside English-Marathi it scored 7.96 (two "
    "seeds) against 7.01 for the recipe alone (docs/transfer.md), below the 9.03 of a child of the "
    "English-Marathi model"
)
RELATED_MEASURED = (
    "8.52 test BLEU over the same three seeds (9.27 / 8.11 / 8.19), chrF 27.38 against 27.14: more of the short "
    "common sentences right, a few words of the related language in the output"
)


@dataclass
class ParentPlan:
    """What ``--init-from`` adds: the parent, its model settings, and its own corpus where that
    corpus is a related one (same source language, another target in this target's script)."""

    path: str
    pair: str  # the parent's, e.g. en-mr
    model: dict
    related: dict[str, str] = field(default_factory=dict)


def parent_plan(init_from: str, found: Survey, src_lang: str, tgt_lang: str) -> ParentPlan:
    from nmt.runtime.parent import load_parent  # only with --init-from: it imports torch

    parent = load_parent(init_from)  # a clear error for anything but a run or a package
    data = parent.config.data
    plan = ParentPlan(init_from, f"{data.src_lang}-{data.tgt_lang}", asdict(parent.config.model))
    processor = parent.tgt_tok.processor  # its target's script: the letters of its pieces (bytes are not)
    words = (processor.id_to_piece(i) for i in range(processor.get_piece_size()) if not processor.is_byte(i))
    script = Counter(s for piece in words for s in _scripts(piece)).most_common(1)
    same_script = bool(script) and script[0][0] == found.script("tgt")
    if data.src_lang == src_lang and data.tgt_lang != tgt_lang and same_script and Path(data.path).is_file():
        plan.related = {data.tgt_lang: data.path}
    return plan


def config_text(
    found: Survey,
    src_lang: str,
    tgt_lang: str,
    run_dir: str,
    minutes: float,
    threads: int,
    parent: ParentPlan | None = None,
) -> str:
    """The commented YAML config ``nmt init`` writes (``parent``: to continue a model, --init-from)."""
    recipe = recipe_for(found.pairs)
    dev, test = split_sizes(found.sources)
    data: dict = {"path": str(found.files[0])}
    if len(found.files) == 2:
        data = {"train": {src_lang: str(found.files[0]), tgt_lang: str(found.files[1])}}
    data |= {"src_lang": src_lang, "tgt_lang": tgt_lang, "dev_size": dev, "test_size": test}
    config: dict[str, Any] = {
        "run_dir": run_dir,
        "data": data,
        "tokenizer": {"src_vocab_size": recipe.vocab, "tgt_vocab_size": recipe.vocab, "model_type": "unigram"},
        "model": {
            **dict.fromkeys(WIDTHS, recipe.width),
            "attention": "luong-concat",
            "input_feeding": recipe.input_feeding,
            "dropout": recipe.dropout,
        },
        "train": {
            "max_minutes": minutes,
            "epochs": 1000,
            "lr_schedule": "budget",
            "lr_hold": 0.7,
            "patience": 0,
            "batch_size": recipe.batch_size,
            "learning_rate": 0.002,
            "label_smoothing": 0.2,
            "max_len": 50,
            "threads": threads,
        },
        "decode": {"beam_size": 5, "no_repeat_span": 6},
    }
    comments = _comments(found, recipe, src_lang, tgt_lang, minutes, threads, parent is not None)
    if parent is not None:
        config = {"run_dir": run_dir, "init_from": parent.path, **{k: v for k, v in config.items() if k != "run_dir"}}
        # a child has its parent's architecture, and on a small corpus the lexical model besides
        config["model"] = {**parent.model, **({"lexical": True} if recipe.lexical_child else {})}
        ensembled = found.pairs <= CHILDREN_UP_TO_PAIRS
        if ensembled:
            train = config["train"]  # members right after the budget they share
            config["train"] = {"max_minutes": train.pop("max_minutes"), "members": CHILDREN, **train}
            config["decode"] |= {"mbr": 8}
        comments += _parent_comments(parent, recipe.lexical_child and not parent.model.get("lexical"), ensembled)
    text = comments + yaml.safe_dump(config, sort_keys=False, allow_unicode=True)
    if parent is None:
        return text + _related_lines(found, tgt_lang)
    return text + _parent_related_lines(parent, tgt_lang)


def _parent_comments(parent: ParentPlan, adds_lexical: bool, ensembled: bool) -> str:
    lexical = f", plus the lexical model (model.lexical: {LEXICAL_MEASURED})" if adds_lexical else ""
    children = f"; {CHILDREN_MEASURED}" if ensembled else ""
    lines = [
        f"Started from {parent.path} ({parent.pair}): its model settings{lexical}, every weight carried "
        f"over{children}, the recipe of configs/eng-hin.yaml ({TRANSFER_MEASURED}; docs/small-data.md).",
        "",
    ]
    return _commented(lines)


def _commented(lines: list[str]) -> str:
    """``lines`` as YAML comments, each wrapped at 98 columns (its continuations indented), an
    empty line an empty comment."""
    wrapped = [piece for line in lines for piece in (textwrap.wrap(line, 98, subsequent_indent="  ") or [""])]
    return "".join(f"# {line}\n" if line else "#\n" for line in wrapped)


def _parent_related_lines(parent: ParentPlan, tgt_lang: str) -> str:
    """The parent's own corpus as a related one (configs/eng-hin-mixed.yaml): the lines to add."""
    if not parent.related:
        return ""
    (lang, path), *_ = parent.related.items()
    lines = [
        f"The parent's own corpus ({path}) translates into {lang}, in your target's script. To continue the "
        f"parent beside it (one model for {tgt_lang} and {lang}, sources tagged; your pairs "
        f"{RELATED_DATA['oversample']} times an epoch beside {RELATED_TRAIN['related_per_epoch']:,} of its pairs "
        f"drawn afresh, then your pairs alone from {RELATED_TRAIN['related_until']:.0%} of the budget on: "
        f"configs/eng-hin-mixed.yaml): {RELATED_MEASURED}. To try it, add these keys to their sections:",
    ]
    sections = {"data": {"related": parent.related, **RELATED_DATA}, "train": RELATED_TRAIN}
    return "\n" + _commented(lines) + _keys(sections)


def _comments(
    found: Survey, recipe: Recipe, src_lang: str, tgt_lang: str, minutes: float, threads: int, child: bool = False
) -> str:
    lines = [
        f"Written by `nmt init` from {', '.join(map(str, found.files))}:",
        f"{found.pairs:,} pairs, {found.sources:,} distinct {src_lang} sentences"
        + (f", {found.problems} malformed line(s) skipped" if found.problems else "")
        + (f", the header row {found.header.strip()!r}" if found.header else "")
        + ".",
        found.describe("src", src_lang) + ";",
        found.describe("tgt", tgt_lang) + ".",
        "",
        (
            f"The training settings of the {recipe.name} recipe (up to {recipe.max_pairs:,} pairs); the model's "
            "are the parent's."
            if child
            else f"The {recipe.name} recipe (up to {recipe.max_pairs:,} pairs): {recipe.why}."
        ),
        f"A {minutes:g}-minute budget on this machine's {threads} thread(s): a faster machine trains more epochs.",
        "Dev and test keep every source sentence in one split and score it with all its translations.",
        "Next: nmt prepare --config THIS && nmt train --config THIS && nmt evaluate --config THIS",
        "",
    ]
    return _commented(lines)


def _related_lines(found: Survey, tgt_lang: str) -> str:
    """Commented lines for a shipped corpus in the target's script (another language), if any:
    a model trained on it as a parent (the better measured), or the corpus itself trained beside
    this one from scratch (the learning curve's related-language line), with the keys to add."""
    text = ""
    for language, (path, script, config) in SHIPPED.items():
        if language != tgt_lang and script == found.script("tgt") and path.is_file():
            text += "\n" + _commented(
                [
                    f"{path.name} ships with nmt: English-{LANGUAGES[language][0]}, the same {script.lower()} "
                    f"script. A model trained on it ({config}; `bash scripts/main.sh` trains one) can start this "
                    f"one, {TRANSFER_MEASURED} (configs/eng-hin.yaml, docs/small-data.md). To write that config:",
                ]
            )
            files = " ".join(map(str, found.files))
            text += f"#   nmt init {files} --init-from runs/{Path(config).stem} --to OTHER.yaml\n"
            text += _commented(
                [
                    "",
                    f"Without that model, {path.name} can train beside your pairs from scratch (one model for "
                    f"{tgt_lang} and {language}, sources tagged; your pairs {SCRATCH_RELATED_DATA['oversample']} "
                    f"times an epoch beside {RELATED_TRAIN['related_per_epoch']:,} of its pairs drawn afresh, then "
                    f"your pairs alone from {RELATED_TRAIN['related_until']:.0%} of the budget on): "
                    f"{SCRATCH_RELATED_MEASURED}. To try it, add these keys to their sections:",
                ]
            )
            shown = path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path  # as a user types it
            sections = {"data": {"related": {language: str(shown)}, **SCRATCH_RELATED_DATA}, "train": RELATED_TRAIN}
            text += _keys(sections)
    return text


def _keys(sections: dict[str, object]) -> str:
    """Config keys to add, one commented line per section, as they are (unwrapped: a reader copies them)."""
    return "".join(
        f"#   {name}: {yaml.safe_dump(values, default_flow_style=True, allow_unicode=True).strip()}\n"
        for name, values in sections.items()
    )


def default_languages(found: Survey) -> tuple[str, str]:
    """(source, target) codes from the files' names; an Anki export's source is English."""
    if len(found.files) == 2:
        return language_of(found.files[0].name) or "src", language_of(found.files[1].name) or "tgt"
    target = language_of(found.files[0].name)
    return "en", target or "tgt"


def init_config(
    data: list[Path],
    to: Path | None,
    minutes: float = 5.0,
    src_lang: str = "",
    tgt_lang: str = "",
    init_from: str = "",
) -> tuple[Path, str]:
    """Survey ``data`` and write its config to ``to`` (default: configs/<name>.yaml beside the
    working folder's configs, or ./<name>.yaml); returns where, and the text written.
    ``init_from``: a model to continue (its settings, and its corpus where it is a related one)."""
    if len(data) not in (1, 2):
        raise NmtError("nmt init takes a TSV file or an Anki zip, or two line-aligned files (source, target).")
    with tempfile.TemporaryDirectory() as unpack_dir:
        found = survey([Path(p) for p in data], Path(unpack_dir))
    guessed = default_languages(found)
    src, tgt = src_lang or guessed[0], tgt_lang or guessed[1]
    name = f"{src}-{tgt}"
    target = to or (Path("configs") / f"{name}.yaml" if Path("configs").is_dir() else Path(f"{name}.yaml"))
    if target.exists():
        raise NmtError(f"{target} exists: give another file with --to (nmt init writes a new config, never over one).")
    threads = max(1, min(os.cpu_count() or 1, 8))
    parent = parent_plan(init_from, found, src, tgt) if init_from else None
    text = config_text(found, src, tgt, f"runs/{target.stem}", minutes, threads, parent)
    write_text_atomic(target, text)
    return target, text
