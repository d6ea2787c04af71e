"""Sequence-level knowledge distillation (Kim & Rush, 2016): a student trained on what a
teacher translates instead of (or beside) the human references.

``data.distill_from: TEACHER`` (a run directory or a model package of the same language pair, or
a list of packages: the ensemble ``nmt translate --model A --model B`` makes, of any families that
share their SentencePiece models) makes ``nmt prepare`` translate the training split's sources with
the teacher's beam search and write those translations as the training targets: ``replace``
(Kim & Rush's recipe: one target per training pair, the teacher's) or ``add`` (the human pairs and
the teacher's, twice the data).
Dev and test keep their human references: the student is scored like any model. The teacher
translates each distinct source once, and the human targets stay beside the distilled ones as
``train.<tgt>.human`` for comparison. The teacher's weights are part of the prepared data's
fingerprint, so another teacher prepares again.

Why it helps a small model: the teacher's translations are more consistent than people's (one
way of saying each thing, no alternatives to average over), so the student spends its capacity
on what the teacher found rather than on the references' variety.

Self-training (He et al., 2020) is the same teacher on other sentences: ``data.synthetic_from:
FILE`` (source sentences, one a line, or a TSV whose first column is the source) are translated
too and trained beside the training pairs (``distill: keep`` leaves the human targets as they
are). Sources of the dev and test sets are left out, and the teacher of a model of several
targets (``data.related``) is asked for this pair's target. A sentence the teacher translates
to nothing makes no pair.
"""

from __future__ import annotations

import time
from pathlib import Path

from nmt.config.paths import PackagePaths, PreparedPaths
from nmt.config.schema import Config
from nmt.core.device import select_device
from nmt.core.errors import NmtError
from nmt.core.fileio import read_lines, sha256_file, write_lines_atomic
from nmt.data.pairs import MAX_PROBLEMS_SHOWN, SENTENCES, ReadResult, check_read
from nmt.data.related import dev_and_test_sources
from nmt.data.tsv import source_sentences
from nmt.pipelines.translate import Translator
from nmt.runtime.loading import LoadedModel, load_torch_packages, load_trained, trained_weights_files


def teacher_paths(config: Config) -> list[Path]:
    """data.distill_from as paths: none, one run directory or package, or several packages."""
    named = config.data.distill_from
    return [Path(path) for path in ([named] if isinstance(named, str) else named) if path]


def teacher_sha256(config: Config) -> str | None:
    """The teacher's weights' sha256 (for the prepared data's fingerprint), or None without one."""
    paths = teacher_paths(config)
    if not paths:
        return None
    hashes = []
    for path in paths:
        files = trained_weights_files(path)
        if not all(f.is_file() for f in files):
            raise NmtError(
                f"data.distill_from: {path} is neither a run directory (config.yaml and checkpoints/best.pt) nor "
                "a model package (manifest.json, from `nmt export`)."
            )
        hashes += [sha256_file(f) for f in files]
    return "-".join(hashes)


def load_teacher(config: Config) -> LoadedModel:
    """The teacher data.distill_from names: one model (or a run's members), or packages ensembled."""
    paths, device = teacher_paths(config), select_device(config.train.device)
    if len(paths) == 1:
        return load_trained(paths[0], device)
    runs = [str(path) for path in paths if not PackagePaths(path).manifest.is_file()]
    if runs:
        raise NmtError(
            f"data.distill_from: a list of teachers is an ensemble of model packages; {', '.join(runs)} is not one "
            "(make it one with `nmt export RUN_DIR PACKAGE`)."
        )
    return load_torch_packages(paths, device)


def human_targets(paths: PreparedPaths) -> Path:
    """Where the training split's own targets are kept once distillation has replaced them."""
    target = paths.text("train", "tgt")
    return target.with_name(target.name + ".human")


def distill_training_targets(config: Config, paths: PreparedPaths, log=print, show_bar: bool = True) -> int:
    """Rewrite the prepared training pairs with the teacher's translations (data.distill);
    returns the number of training pairs written."""
    data = config.data
    teacher = load_teacher(config)
    named = " + ".join(str(path) for path in teacher_paths(config))
    if teacher.config.data.src_lang != data.src_lang or data.tgt_lang not in teacher.config.data.targets:
        said = ", ".join(teacher.config.data.targets)
        raise NmtError(
            f"data.distill_from: the teacher {named} translates {teacher.config.data.src_lang} -> "
            f"{said}, this config {data.src_lang} -> {data.tgt_lang}."
        )
    sources = read_lines(paths.text("train", "src"))
    human = read_lines(paths.text("train", "tgt"))
    attribution = read_lines(paths.attribution("train"))
    synthetic = synthetic_sources(config, paths, log)
    distinct = list(dict.fromkeys(([] if data.distill == "keep" else sources) + synthetic))
    what = [] if data.distill == "keep" else [f"{len(set(sources)):,} distinct training sources"]
    what += [f"{len(synthetic):,} sentences of {data.synthetic_from} (self-training)"] if synthetic else []
    log(
        f"Distillation: the teacher {named} translates {' and '.join(what)} (beam {teacher.config.decode.beam_size})..."
    )
    started = time.monotonic()
    translator = Translator(teacher, data.tgt_lang)
    translated = dict(zip(distinct, translator.translate(distinct, progress=show_bar)))
    seconds = time.monotonic() - started
    log(
        f"Distillation: {len(distinct):,} sources in {seconds:.0f} s ({len(distinct) / max(seconds, 1e-9):.0f}/s): "
        f"the teacher's cost, beside the student's training budget."
    )
    by_teacher = f"distilled by {named}"
    out_src, out_tgt, out_attribution = list(sources), list(human), list(attribution)
    if data.distill != "keep":
        # a source the teacher translates to nothing keeps its human target (no empty targets to learn)
        distilled = [translated[source] or target for source, target in zip(sources, human)]
        write_lines_atomic(human_targets(paths), human)
        if data.distill == "replace":
            out_tgt = distilled
        else:
            out_src, out_tgt = sources + sources, human + distilled
            out_attribution = attribution + [by_teacher] * len(sources)
    made = [(source, translated[source]) for source in synthetic if translated[source]]
    out_src += [source for source, _ in made]
    out_tgt += [target for _, target in made]
    out_attribution += [f"self-training: {by_teacher}"] * len(made)
    write_lines_atomic(paths.text("train", "src"), out_src)
    write_lines_atomic(paths.text("train", "tgt"), out_tgt)
    write_lines_atomic(paths.attribution("train"), out_attribution)
    return len(out_src)


def synthetic_sources(config: Config, paths: PreparedPaths, log=print) -> list[str]:
    """data.synthetic_from's distinct sentences (a TSV's first column), normalised as prepared
    text is, without the dev and test sources."""
    if not config.data.synthetic_from:
        return []
    held = set().union(*dev_and_test_sources(paths))
    data = config.data
    result = ReadResult(keep_problems=MAX_PROBLEMS_SHOWN)
    sentences = list(dict.fromkeys(source_sentences(data.synthetic_from, result)))
    check_read(result, data.synthetic_from, SENTENCES, data.on_malformed, log, key="data.synthetic_from")
    return [text for text in sentences if text not in held]
