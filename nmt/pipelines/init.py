"""``nmt init DATA``: a first config for a corpus, written from what the corpus is.

It reads the user's file(s) once — a TSV (Anki/Tatoeba export), an Anki zip, or two line-aligned
files — counts pairs, distinct sources and sentence lengths, finds each side's script and each
side's language (from the file names and the scripts), and writes a commented config with the
recipe measured for a corpus of that size (``nmt/recipes.yaml``, read by
``nmt.config.recipes``), this machine's cores and the time budget asked for. Where a corpus
the package ships shares the target's script (the eng-mar file for a Devanagari target), the
config says how a model trained on it can be the starting point. A file ``nmt prepare`` would
refuse is refused here, with its file and line.
"""

from __future__ import annotations

import tempfile
import textwrap
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from nmt import install_hint
from nmt.config.recipes import FamilyRecipe, FamilyRule, Measured, Recipe, Sections, example_corpora, recipes
from nmt.core.device import select_device
from nmt.core.errors import NmtError
from nmt.core.fileio import write_text_atomic
from nmt.core.threads import usable_cores
from nmt.data.alignments import eflomal_installed
from nmt.data.languages import header_languages, language_name
from nmt.data.profile import (
    LANGUAGE_SCRIPTS,
    CorpusProfile,
    guess_languages,
    profile_corpus,
    script_fits,
    scripts_in,
    written_in,
)
from nmt.data.split import carved_ranks

# ---- the split and the recipes ----


def split_sizes(sources: int) -> tuple[int, int]:
    """(dev, test) distinct sources, by the rule of nmt/recipes.yaml's ``split``: a small
    corpus's dev set small (it only watches the run), its test set a share; a large corpus's
    both a share, capped. A toy corpus, where the floor of 20 each would hold back half of it,
    keeps the shares, at least one each. The split is checked by prepare's own rule, so a corpus
    too small to split is refused here, as ``nmt prepare`` would refuse it."""
    rule = recipes().split
    if sources < rule["small_below"]:
        floor = int(rule["at_least"])
        dev = max(floor, min(int(rule["small_dev_at_most"]), round(rule["small_dev_share"] * sources)))
        test = max(floor, round(rule["small_test_share"] * sources))
        if dev + test > sources // 2:
            dev, test = (
                max(1, round(rule["small_dev_share"] * sources)),
                max(1, round(rule["small_test_share"] * sources)),
            )
    else:
        dev = test = min(int(rule["large_at_most"]), round(rule["large_share"] * sources))
    carved_ranks(sources, dev, test, seed=0)  # NmtError where it leaves nothing to train on
    return dev, test


@dataclass
class ParentPlan:
    """What ``--init-from`` adds: the parent, its model settings, and its own corpus where that
    corpus is a related one (same source language, another target in this target's script)."""

    path: str
    pair: str  # the parent's, e.g. en-mr
    model: dict
    family: FamilyRecipe  # the parent's, as the recipes write its children
    related: dict[str, str] = field(default_factory=dict)
    schedule: dict = field(default_factory=dict)  # the parent's training keys its family's child takes
    # the parent's vocabulary keys a child keeps: one joint vocabulary and its size, the language codes
    tokenizer: dict = field(default_factory=dict)


def parent_plan(init_from: str, found: CorpusProfile, src_lang: str, tgt_lang: str) -> ParentPlan:
    from nmt.runtime.parent import load_parent  # only with --init-from: it imports torch

    parent = load_parent(init_from)  # a clear error for anything but a run or a package
    data = parent.config.data
    family = recipes().family_of(parent.config.model.arch)
    plan = ParentPlan(init_from, f"{data.src_lang}-{data.tgt_lang}", parent.config.model.keys(), family)
    plan.schedule = {key: getattr(parent.config.train, key) for key in family.child_schedule}
    if "output_bias" in parent.config.train.freeze:  # an import from M2M100: its children stay exportable there
        plan.schedule["freeze"] = ["output_bias"]
    tok = parent.config.tokenizer
    if tok.joint:  # an imported M2M100's, NLLB's: the child reads the parent's one SentencePiece model
        plan.tokenizer = {"joint": True, "src_vocab_size": tok.src_vocab_size, "tgt_vocab_size": tok.tgt_vocab_size}
    plan.tokenizer |= {key: getattr(tok, key) for key in ("src_code", "tgt_code") if getattr(tok, key)}
    processor = parent.tgt_tok.processor  # its target's script: the letters of its pieces (bytes are not)
    words = (processor.id_to_piece(i) for i in range(processor.get_piece_size()) if not processor.is_byte(i))
    script = Counter(s for piece in words for s in scripts_in(piece)).most_common(1)
    same_script = bool(script) and script[0][0] == found.script("tgt")
    if data.src_lang == src_lang and data.tgt_lang != tgt_lang and same_script:
        corpus = _parent_corpus(data.path, data.src_lang, data.tgt_lang)
        if corpus is not None:
            plan.related = {data.tgt_lang: corpus}
    return plan


def _parent_corpus(path: str, src_lang: str, tgt_lang: str) -> str | None:
    """The parent's own corpus: where its config says, or the example corpus of its pair."""
    if path and Path(path).is_file():
        return path
    shipped = [c for c in example_corpora() if (c.src_lang, c.tgt_lang) == (src_lang, tgt_lang)]
    return _as_typed(shipped[0].path) if shipped else None


def _as_typed(path: Path) -> str:
    """A path as a user would type it here: relative to the working folder where it is inside it."""
    return str(path.relative_to(Path.cwd())) if path.is_relative_to(Path.cwd()) else str(path)


def _merged(*sections: dict) -> dict[str, dict]:
    """Config sections, later ones' keys over earlier ones'."""
    merged: dict[str, dict] = {}
    for part in sections:
        for section, values in part.items():
            merged[section] = {**merged.get(section, {}), **values}
    return merged


def config_text(
    found: CorpusProfile,
    src_lang: str,
    tgt_lang: str,
    run_dir: str,
    minutes: float,
    cores: int,
    parent: ParentPlan | None = None,
    gpu: bool = False,
    arch: str = "",
) -> str:
    """The commented YAML config ``nmt init`` writes (``parent``: to continue a model, --init-from;
    ``gpu``: for a machine where PyTorch sees a CUDA GPU; ``arch``: the family asked for, rnn or
    transformer, instead of the one measured ahead for this corpus and budget)."""
    book = recipes()
    recipe = book.for_pairs(found.pairs)
    dev, test = split_sizes(found.sources)
    data: dict = {"path": str(found.files[0])}
    if len(found.files) == 2:
        data = {"train": {src_lang: str(found.files[0]), tgt_lang: str(found.files[1])}}
    data |= {"src_lang": src_lang, "tgt_lang": tgt_lang, "dev_size": dev, "test_size": test}
    on_gpu = recipe.on_gpu if gpu else None
    # the rules were measured on a CPU (on a GPU the RNN led); a child is of its parent's family
    default = book.default_family
    family, rule = (
        (default, None) if parent is not None or (gpu and not arch) else book.family_for(found.pairs, minutes, arch)
    )
    settings = _merged(default.settings, book.common, recipe.settings, on_gpu.settings if on_gpu else {})
    if family is not default:  # another family: its model whole, its keys over the recipe's training ones
        settings = _merged({**settings, "model": {}}, family.settings)
    guided, guided_lines = _guided(recipe, family, parent is None and not gpu)
    settings = _merged(settings, guided)
    config: dict[str, Any] = {"run_dir": run_dir, "data": data}
    config |= {section: settings.get(section, {}) for section in ("tokenizer", "model")}
    config["train"] = {"max_minutes": minutes, **settings["train"], "threads": "auto"}
    config["decode"] = settings["decode"]
    chosen = None if parent is not None else (family, rule)
    comments = _comments(found, recipe, src_lang, tgt_lang, minutes, cores, chosen, arch)
    if on_gpu is not None:
        comments += _commented(
            [f"On this machine's CUDA GPU: batches by tokens, {on_gpu.measured} ({on_gpu.page}).", ""]
        )
    comments += guided_lines
    if parent is not None:
        config, comments = _child_config(config, comments, found, recipe, parent)
    text = comments + yaml.safe_dump(config, sort_keys=False, allow_unicode=True)
    if parent is None:  # related pairs and guided alignment do not go together (check_guided_alignment)
        unguided = {"train": dict.fromkeys(guided.get("train", {}), 0)}
        text += _related_lines(found, src_lang, tgt_lang, family, unguided if guided else {})
    else:
        text += _parent_related_lines(parent, tgt_lang)
    return text + _table_lines()


def _table_lines() -> str:
    """The recipes measured here side by side (nmt/recipes.yaml's ``table``): what each scored,
    in what time, and where its model runs, as docs/small-data.md's table lists them."""
    book = recipes()
    rows = [
        f"#   {row.corpus} | {row.recipe} | {row.minutes:g} min | {row.bleu:.1f} | {row.runs_on}\n"
        for row in book.table
    ]
    return "\n" + _commented(list(book.table_intro)) + "".join(rows)


def _guided(recipe: Recipe, family: FamilyRecipe, measured_here: bool) -> tuple[Sections, str]:
    """Guided alignment where ``family`` measured it (its ``guided``; ``measured_here``: not a
    child, not on a GPU): its settings where eflomal is installed to make the links, and the
    config's lines saying so, or what it gains and how to add it."""
    offered = recipes().guided_for(recipe, family)
    if not (measured_here and offered):
        return {}, ""
    gain = f"{offered.measured} ({offered.page})"
    if eflomal_installed():
        line = (
            "Guided alignment (train.guided_alignment): the attention trained toward the word aligner eflomal's "
            f"links of the training pairs, computed before the budget starts; {gain}. train.probe_alignment "
            "records how well it aligns at each validation (the lab's timeline)."
        )
        return offered.settings, _commented([line, ""])
    line = (
        "Guided alignment is left out: it trains the attention toward the word aligner eflomal's links, and "
        f"eflomal is not installed ({install_hint('align', 'eflomal')}; it builds with a C compiler in about a "
        f"minute). It gave {gain}. With eflomal installed, or your corpus's links in a file (data.links), add "
        "these keys to their sections:"
    )
    return {}, _commented([line]) + _keys(offered.settings) + "#\n"


def _child_config(
    config: dict, comments: str, found: CorpusProfile, recipe: Recipe, parent: ParentPlan
) -> tuple[dict, str]:
    """The transfer recipe (configs/eng-hin.yaml): the parent's model (plus what the recipe adds to
    a child), and on a corpus small enough, children side by side, ensembled."""
    book = recipes()
    config = {
        "run_dir": config["run_dir"],
        "init_from": parent.path,
        **{k: v for k, v in config.items() if k != "run_dir"},
    }
    # A child of another family is what was measured of one (a Transformer's, docs/transformer.md): one
    # model, the parent's schedule, none of the recipe's additions (the lexical model reads an RNN's attention)
    recipe_children = parent.family.recipe_children
    adds = recipe.child_adds.get("model", {}) if recipe_children else {}
    config["model"] = {**parent.model, **adds}
    config["tokenizer"] = {**config["tokenizer"], **parent.tokenizer}
    config["train"] = {**config["train"], **parent.schedule}
    ensembled = found.pairs <= book.children_up_to_pairs and recipe_children
    if ensembled:
        extra = book.children.settings
        train = config["train"]  # members right after the budget they share
        config["train"] = {"max_minutes": train.pop("max_minutes"), **extra.get("train", {}), **train}
        config["decode"] = {**config["decode"], **extra.get("decode", {})}
    adds_lexical = bool(adds.get("lexical")) and not parent.model.get("lexical")
    return config, comments + _parent_comments(parent, adds_lexical, ensembled)


def _parent_comments(parent: ParentPlan, adds_lexical: bool, ensembled: bool) -> str:
    book = recipes()
    if not parent.family.recipe_children:
        return _commented(
            [
                f"Started from {parent.path} ({parent.pair}), {parent.family.title}: its model settings and "
                f"learning-rate schedule, every weight carried over, one model ({parent.family.page}).",
                "",
            ]
        )
    lexical = f", plus the lexical model (model.lexical: {book.lexical_measured})" if adds_lexical else ""
    children = f"; {book.children.measured}" if ensembled else ""
    lines = [
        f"Started from {parent.path} ({parent.pair}): its model settings{lexical}, every weight carried "
        f"over{children}, the recipe of configs/eng-hin.yaml ({book.transfer.measured}; {book.transfer.page}).",
        "",
    ]
    return _commented(lines)


def _commented(lines: list[str]) -> str:
    """``lines`` as YAML comments, each wrapped at 98 columns (its continuations indented), an
    empty line an empty comment. A path is never split (at its hyphens, or for its length): a
    reader copies it whole."""
    wrap = partial(textwrap.wrap, width=98, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False)
    wrapped = [piece for line in lines for piece in (wrap(line) or [""])]
    return "".join(f"# {line}\n" if line else "#\n" for line in wrapped)


def _beside(measured: Measured) -> str:
    """How a related corpus is trained beside the user's pairs, in words, from its settings."""
    data, train = measured.settings["data"], measured.settings["train"]
    return (
        f"your pairs {data['oversample']} times an epoch beside {train['related_per_epoch']:,} of its pairs drawn "
        f"afresh, then your pairs alone from {train['related_until']:.0%} of the budget on"
    )


def _parent_related_lines(parent: ParentPlan, tgt_lang: str) -> str:
    """The parent's own corpus as a related one (configs/eng-hin-mixed.yaml): the lines to add."""
    if not parent.related:
        return ""
    (lang, path), *_ = parent.related.items()
    offered = recipes().related_to_parent
    lines = [
        f"The parent's own corpus ({path}) translates into {lang}, in your target's script. To continue the "
        f"parent beside it (one model for {tgt_lang} and {lang}, sources tagged; {_beside(offered)}: "
        f"configs/eng-hin-mixed.yaml): {offered.measured}. To try it, add these keys to their sections:",
    ]
    return "\n" + _commented(lines) + _keys(_merged({"data": {"related": parent.related}}, offered.settings))


def _comments(
    found: CorpusProfile,
    recipe: Recipe,
    src_lang: str,
    tgt_lang: str,
    minutes: float,
    cores: int,
    chosen: tuple[FamilyRecipe, FamilyRule | None] | None = None,
    arch: str = "",
) -> str:
    """The config's opening comments; ``chosen``: the family written and the rule that chose it
    (None for a child, of its parent's family)."""
    which = [] if chosen is None else [_family_line(*chosen, arch)]
    lines = [
        f"Written by `nmt init` from {', '.join(map(str, found.files))}:",
        f"{found.pairs:,} pairs, {found.sources:,} distinct {src_lang} sentences"
        + (f", {found.duplicates:,} exact duplicate(s) dropped (as prepare drops them)" if found.duplicates else "")
        + (f", {found.problems} malformed line(s) skipped" if found.problems else "")
        + (f", the header row {found.header.strip()!r}" if found.header else "")
        + ".",
        found.describe("src", f"{src_lang} ({language_name(src_lang)})") + ";",
        found.describe("tgt", f"{tgt_lang} ({language_name(tgt_lang)})") + ".",
        "",
        _recipe_line(recipe, chosen),
        f"A {minutes:g}-minute budget on this machine's {cores} core(s): a faster machine trains more epochs. "
        "train.threads: auto measures how many threads train fastest, and again while the run goes on "
        "(another program's load can make fewer faster).",
        *which,
        "Dev and test keep every source sentence in one split and score it with all its translations.",
        "Next: nmt prepare --config THIS && nmt train --config THIS && nmt evaluate --config THIS",
        "",
    ]
    return _commented(lines)


def _family_line(family: FamilyRecipe, rule: FamilyRule | None, arch: str) -> str:
    """Which family is written and why: where its rule measured it ahead, or why it is the default."""
    others = [other for name, other in recipes().families.items() if name != family.arch]
    named = f"{family.title[0].upper()}{family.title[1:]}, not {' or '.join(o.title for o in others)} (model.arch)"
    if arch:
        offered = " or ".join(f"--arch {o.arch}" for o in others)
        named += f" (--arch {arch}; nmt init {offered} writes the other)"
    if rule is None:
        return f"{named}: {family.measured} ({family.page})."
    return (
        f"{named}: where it was measured ahead, for up to {rule.up_to_pairs:,} pairs from {rule.from_minutes:g} "
        f"minutes on, {rule.measured} ({rule.page})."
    )


def _recipe_line(recipe: Recipe, chosen: tuple[FamilyRecipe, FamilyRule | None] | None) -> str:
    """Which recipe the settings come from, and what it measured where its model is the one written."""
    named = f"{recipe.name} recipe (up to {recipe.max_pairs:,} pairs"
    if chosen is None:
        return f"The training settings of the {named}); the model's are the parent's."
    family = chosen[0]
    if not family.default:
        return (
            f"The tokenizer and batches of the {named}, {recipe.page}); the model and its schedule are the "
            f"{family.name}'s."
        )
    return f"The {named}): {recipe.measured} ({recipe.page})."


def _related_lines(
    found: CorpusProfile, src_lang: str, tgt_lang: str, family: FamilyRecipe, also: Sections | None = None
) -> str:
    """Commented lines for a corpus the package ships in the target's script (another language),
    if any: a model trained on it as a parent (the better measured), or the corpus itself trained
    beside this one from scratch (the learning curve's related-language lines: the RNN's, or the
    Transformer's where the config trains one), with the keys to add (and ``also``'s)."""
    book = recipes()
    offered = Measured(book.related_from_scratch.settings, family.related_measured, book.related_from_scratch.page)
    text = ""
    for corpus in example_corpora():
        if corpus.src_lang != src_lang or corpus.tgt_lang == tgt_lang or corpus.script != found.script("tgt"):
            continue
        if not corpus.parent:  # shipped to try a recipe on, not measured as a parent
            continue
        name = f"English-{language_name(corpus.tgt_lang)}"
        text += "\n" + _commented(
            [
                f"{corpus.path.name} ships with nmt ({name}, the same {corpus.script.lower()} script). A model "
                f"trained on it can start this one, {book.transfer.measured} (configs/eng-hin.yaml, "
                f"{book.transfer.page}). To train that model here (about 6 minutes) and write that config:",
            ]
        )
        files = " ".join(map(str, found.files))
        text += f"#   nmt init --example {corpus.name} && nmt train --config {corpus.config}\n"
        text += f"#   nmt init {files} --init-from {corpus.run_dir} --to OTHER.yaml\n"
        text += _commented(
            [
                "",
                f"Without that model, {corpus.path.name} can train beside your pairs from scratch (one model for "
                f"{tgt_lang} and {corpus.tgt_lang}, sources tagged; {_beside(offered)}): {offered.measured} "
                f"({offered.page}). To try it, add these keys to their sections:",
            ]
        )
        related = {"data": {"related": {corpus.tgt_lang: _as_typed(corpus.path)}}}
        text += _keys(_merged(related, offered.settings, also or {}))
    return text


def _keys(sections: dict[str, dict]) -> str:
    """Config keys to add, one commented line per section, as they are (unwrapped: a reader copies them)."""
    return "".join(
        f"#   {name}: {yaml.safe_dump(values, default_flow_style=True, allow_unicode=True).strip()}\n"
        for name, values in sections.items()
    )


def chosen_languages(found: CorpusProfile, src_lang: str, tgt_lang: str) -> tuple[str, str, list[str]]:
    """(source, target, warnings): --src-lang / --tgt-lang, else what a header row names
    (``Eng<TAB>Hin``), else the file names and the scripts; refused only where nothing tells (or
    both sides would be one language, which prepare refuses). A code whose usual script is not
    the text's is kept, with a warning naming the mismatch."""
    header = header_languages(found.header)
    guessed = tuple(header[:2]) if len(header) >= 2 else guess_languages(found.files, *_sides(found))
    src, tgt = src_lang or (guessed[0] if guessed else ""), tgt_lang or (guessed[1] if guessed else "")
    if src and tgt and src != tgt:
        return src, tgt, [w for code, side in ((src, "src"), (tgt, "tgt")) if (w := _script_warning(found, code, side))]
    if src and tgt:
        raise NmtError(f"--src-lang and --tgt-lang are both {src!r}: they name the direction and must differ.")
    names = ", ".join(f.name for f in found.files)
    examples = " ".join(f"--{side}-lang {(written_in(found.script(side)) or ['xx'])[0]}" for side in ("src", "tgt"))
    codes = {side: ", ".join(written_in(found.script(side))[:4]) or "no code here" for side in ("src", "tgt")}
    scripts = "; ".join(f"{side}: {found.script(side).lower()} script ({codes[side]})" for side in ("src", "tgt"))
    raise NmtError(
        f"nmt init cannot tell the languages of {names} from a header row, its name or its scripts ({scripts}): "
        f"give them as language codes, e.g. {examples} (or name the file like eng-hin.tsv or en-hi.tsv, or give "
        "it a header row such as English<TAB>Hindi)."
    )


def _sides(found: CorpusProfile) -> tuple[str, str]:
    return found.script("src"), found.script("tgt")


def _script_warning(found: CorpusProfile, code: str, side: str) -> str:
    """A warning when language ``code`` is not usually written in the script of ``side``'s text."""
    script = found.script(side)
    if script == "UNKNOWN" or script_fits(code, script):
        return ""
    usual = LANGUAGE_SCRIPTS.get(code, "LATIN").lower()
    fits = ", ".join(written_in(script)[:4]) or "none of the codes nmt knows"
    which = "source" if side == "src" else "target"
    return (
        f"warning: the {which} is {code} ({language_name(code)}), usually written in {usual} script, but its text "
        f"is in {script.lower()} script (codes written so: {fits}). Check --{side}-lang: the code names the files, "
        "the report and the model card."
    )


def init_config(
    data: list[Path],
    to: Path | None,
    minutes: float = 5.0,
    src_lang: str = "",
    tgt_lang: str = "",
    init_from: str = "",
    arch: str = "",
    warn: Callable[[str], None] = lambda message: None,
) -> tuple[Path, str]:
    """Profile ``data`` and write its config to ``to`` (default: configs/<name>.yaml beside the
    working folder's configs, or ./<name>.yaml); returns where, and the text written.
    ``init_from``: a model to continue (its settings, and its corpus where it is a related one);
    ``arch``: rnn or transformer, instead of the family measured ahead; ``warn``: told of what looks
    wrong but is kept (a language code whose script is not the text's)."""
    families = recipes().families
    if arch and arch not in families:
        raise NmtError(f"--arch {arch!r}: one of {', '.join(families)} (the families the recipes write).")
    if arch and init_from:
        raise NmtError("--arch and --init-from: a model continued keeps its own family. Give one of them.")
    if len(data) not in (1, 2):
        raise NmtError("nmt init takes a TSV file or an Anki zip, or two line-aligned files (source, target).")
    with tempfile.TemporaryDirectory() as unpack_dir:
        found = profile_corpus([Path(p) for p in data], Path(unpack_dir))
    src, tgt, warnings = chosen_languages(found, src_lang, tgt_lang)
    for warning in warnings:
        warn(warning)
    name = f"{src}-{tgt}"
    target = to or (Path("configs") / f"{name}.yaml" if Path("configs").is_dir() else Path(f"{name}.yaml"))
    if target.exists():
        raise NmtError(f"{target} exists: give another file with --to (nmt init writes a new config, never over one).")
    cores = usable_cores()
    parent = parent_plan(init_from, found, src, tgt) if init_from else None
    gpu = select_device("auto").type == "cuda"
    text = config_text(found, src, tgt, f"runs/{target.stem}", minutes, cores, parent, gpu, arch)
    write_text_atomic(target, text)
    return target, text
