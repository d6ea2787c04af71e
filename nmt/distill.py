"""Sequence-level knowledge distillation (Kim & Rush, 2016): a student trained on what a
teacher translates instead of (or beside) the human references.

``data.distill_from: TEACHER`` (a run directory or a model package of the same language pair)
makes ``nmt prepare`` translate the training split's sources with the teacher's beam search and
write those translations as the training targets: ``replace`` (Kim & Rush's recipe: one target per
training pair, the teacher's) or ``add`` (the human pairs and the teacher's, twice the data).
Dev and test keep their human references: the student is scored like any model. The teacher
translates each distinct source once, and the human targets stay beside the distilled ones as
``train.<tgt>.human`` for comparison. The teacher's weights are part of the prepared data's
fingerprint, so another teacher prepares again.

Why it helps a small model: the teacher's translations are more consistent than people's (one
way of saying each thing, no alternatives to average over), so the student spends its capacity
on what the teacher found rather than on the references' variety.
"""

from __future__ import annotations

import time
from pathlib import Path

from nmt.config import Config
from nmt.device import select_device
from nmt.errors import NmtError
from nmt.fileio import read_lines, sha256_file, write_lines_atomic
from nmt.loading import load_trained, trained_weights_files
from nmt.paths import PreparedPaths
from nmt.translate import Translator


def teacher_sha256(config: Config) -> str | None:
    """The teacher's weights' sha256 (for the prepared data's fingerprint), or None without one."""
    if not config.data.distill_from:
        return None
    path = Path(config.data.distill_from)
    files = trained_weights_files(path)
    if not all(f.is_file() for f in files):
        raise NmtError(
            f"data.distill_from: {path} is neither a run directory (config.yaml and checkpoints/best.pt) nor "
            "a model package (manifest.json, from `nmt export`)."
        )
    return "-".join(sha256_file(f) for f in files)


def human_targets(paths: PreparedPaths) -> Path:
    """Where the training split's own targets are kept once distillation has replaced them."""
    target = paths.text("train", "tgt")
    return target.with_name(target.name + ".human")


def distill_training_targets(config: Config, paths: PreparedPaths, log=print, show_bar: bool = True) -> int:
    """Rewrite the prepared training pairs with the teacher's translations (data.distill);
    returns the number of training pairs written."""
    teacher = load_trained(Path(config.data.distill_from), select_device(config.train.device))
    pair = (teacher.config.data.src_lang, teacher.config.data.tgt_lang)
    if pair != (config.data.src_lang, config.data.tgt_lang):
        raise NmtError(
            f"data.distill_from: the teacher {config.data.distill_from} translates {pair[0]} -> {pair[1]}, "
            f"this config {config.data.src_lang} -> {config.data.tgt_lang}."
        )
    sources = read_lines(paths.text("train", "src"))
    human = read_lines(paths.text("train", "tgt"))
    attribution = read_lines(paths.attribution("train"))
    distinct = list(dict.fromkeys(sources))
    beam = teacher.config.decode.beam_size
    log(f"Distillation: the teacher {config.data.distill_from} translates {len(distinct):,} distinct training "
        f"sources (beam {beam})...")  # fmt: skip
    started = time.monotonic()
    translated = dict(zip(distinct, Translator(teacher).translate(distinct, progress=show_bar)))
    seconds = time.monotonic() - started
    log(f"Distillation: {len(distinct):,} sources in {seconds:.0f} s ({len(distinct) / max(seconds, 1e-9):.0f}/s): "
        f"the teacher's cost, beside the student's training budget.")  # fmt: skip
    # a source the teacher translates to nothing keeps its human target (no empty targets to learn)
    distilled = [translated[source] or target for source, target in zip(sources, human)]
    write_lines_atomic(human_targets(paths), human)
    if config.data.distill == "replace":
        write_lines_atomic(paths.text("train", "tgt"), distilled)
        return len(sources)
    write_lines_atomic(paths.text("train", "src"), sources + sources)
    write_lines_atomic(paths.text("train", "tgt"), human + distilled)
    write_lines_atomic(
        paths.attribution("train"), attribution + [f"distilled by {teacher.config.run_dir}"] * len(sources)
    )
    return 2 * len(sources)
