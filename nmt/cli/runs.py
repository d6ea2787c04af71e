"""``nmt plot``, ``tune``, ``compare`` and ``average``: what a run shows, a recipe searched for,
attentions compared on one's own pairs, checkpoints averaged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
import yaml

from nmt.cli.common import (
    PLOT_SUFFIXES_BY_NAME,
    ConfigOption,
    DeviceOption,
    RunDirArgument,
    SetOption,
    command_config,
    device_of,
    draw_learning_curves,
    finite_minutes,
    user_errors,
    writing_run,
)
from nmt.core.errors import NmtError


@user_errors
def plot(
    run_dir: RunDirArgument,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Learning curves file (default: RUN_DIR/learning_curves.png).")
    ] = None,
    image_format: Annotated[
        str, typer.Option("--format", help="png, svg or pdf: the files' format when --output is not given.")
    ] = "png",
) -> None:
    """Draw the learning curves (train/dev loss, dev BLEU/chrF by epoch) from RUN_DIR/metrics.jsonl,
    and the attention timeline (the first probe sentence's attention at successive validations)
    from RUN_DIR/timeline.jsonl when training recorded one (train.probes).

    Works while training runs: it plots the epochs validated so far.
    """
    from nmt.config.paths import RunPaths
    from nmt.core.plotting import plot_timeline
    from nmt.training.metrics import MetricsFile, RunSummary
    from nmt.training.timeline import read_timeline

    if image_format not in PLOT_SUFFIXES_BY_NAME:
        raise NmtError(f"--format: got {image_format!r}, expected one of {', '.join(PLOT_SUFFIXES_BY_NAME)}.")
    run = RunPaths(run_dir)
    drawn = draw_learning_curves(run_dir, output or run.learning_curves.with_suffix(f".{image_format}"))
    summary = RunSummary.of(MetricsFile(run.metrics).read())
    if drawn is None or summary is None:
        raise NmtError(f"No validation in {run.metrics} yet: it is written after the first epoch of `nmt train`.")
    typer.echo(f"Wrote {drawn[0]} ({summary.trained_line()}; {summary.best_line()})")
    records = read_timeline(run.timeline) if run.timeline.is_file() else []
    if records and records[0]["probes"]:
        path = run.timeline_plot.with_suffix(f".{image_format}")
        count = plot_timeline(records, path)
        typer.echo(f"Wrote {path} (the first probe sentence at the end of each of {count} whole epochs)")


@user_errors
def tune(
    config: ConfigOption,
    set_: SetOption = None,
    trials: Annotated[int | None, typer.Option("--trials", help="Trials in the study (tune.trials).")] = None,
    minutes: Annotated[
        float | None,
        typer.Option("--minutes", help="The budget the recipe is for (train.max_minutes); trials get a share of it."),
    ] = None,
    workers: Annotated[
        int | None, typer.Option("--workers", help="Trials at once (tune.workers; default: measured).")
    ] = None,
    space: Annotated[
        Path | None,
        typer.Option("--space", help="A YAML search space instead of tune.space: KEY: {low, high} or {choices}."),
    ] = None,
    storage: Annotated[
        str, typer.Option("--storage", help="An Optuna RDB URL shared by several machines (default: a journal file).")
    ] = "",
    device: DeviceOption = None,
) -> None:
    """Find the best recipe for this corpus, this machine and this budget: a study of short trials.

    Each trial trains the config with values from the search space for tune.trial_fraction of the
    budget and reports its dev BLEU to a pruner; the best tune.confirm trials are trained again at
    the full budget with each of tune.seeds, and the winner is written as <run_dir>/tune/tuned.yaml,
    with report.md beside it. Stopped (Ctrl-C) and run again, the study goes on where it was.
    docs/tuning.md has a worked example.
    """
    from nmt.pipelines.tune import tune as run_study
    from nmt.training.state import TrainingInterrupted

    cfg = command_config(config, set_)
    if minutes is not None:
        cfg.train.max_minutes = finite_minutes(minutes)
    if trials is not None:
        cfg.tune.trials = trials
    if workers is not None:
        cfg.tune.workers = workers
    raw_space = None
    if space is not None:
        raw_space = yaml.safe_load(space.read_text(encoding="utf-8")) or {}
        if not isinstance(raw_space, dict):
            raise NmtError(f"{space}: a search space is a mapping of config keys to ranges or choices.")
    try:
        with writing_run(cfg, f"nmt tune --config {config}"):
            run_study(cfg, device_of(cfg, device), raw_space, storage, log=lambda msg: typer.echo(msg, err=True))
    except TrainingInterrupted as exc:
        typer.echo(f"{exc} The study is kept in {cfg.run_dir}/tune: run the same command again to go on.", err=True)
        raise typer.Exit(130) from None


@user_errors
def compare(
    config: ConfigOption,
    set_: SetOption = None,
    attention: Annotated[
        list[str] | None,
        typer.Option("--attention", help="An attention to train (repeat: bahdanau, luong-general, luong-concat, ...)."),
    ] = None,
    transformer: Annotated[
        bool, typer.Option("--transformer", help="Also nmt init's Transformer (its every head's AER too).")
    ] = False,
    minutes: Annotated[
        float, typer.Option("--minutes", help="The budget the variants share, each trained for its share.")
    ] = 10.0,
    runs_dir: Annotated[
        Path | None, typer.Option("--runs", help="Where the variants' runs go (default: <run_dir>-compare).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the results as JSON on stdout.")] = False,
    device: DeviceOption = None,
) -> None:
    """Which attention aligns and translates best on these pairs? Trains each variant of the config
    on the same prepared data, the budget shared evenly (a variant already trained is reused), then
    scores each on the test set with all its references (BLEU, chrF) and holds its attention
    against eflomal's word alignments of the same pairs (AER, lower is better; the align extra).
    A table on stdout, <runs>/compare.json beside the runs; docs/alignment.md reads the answer.
    """
    from nmt.pipelines.variants import compare_variants, table, variants

    chosen = variants(attention or ["bahdanau", "luong-general", "luong-concat"], transformer)
    cfg = command_config(config, set_)
    found = compare_variants(
        config,
        set_ or [],
        chosen,
        finite_minutes(minutes),
        runs_dir,
        device_of(cfg, device),
        log=lambda msg: typer.echo(msg, err=True),
    )
    typer.echo(json.dumps(found, ensure_ascii=False) if as_json else table(found))


@user_errors
def average(
    run_dir: RunDirArgument,
    last: Annotated[
        int, typer.Option("--last", "-k", min=2, help="How many of the newest step checkpoints to average.")
    ] = 3,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Where to write (default: RUN_DIR/checkpoints/averaged.pt)."),
    ] = None,
) -> None:
    """Average the weights of the newest step checkpoints (train.checkpoint_every, train.keep_checkpoints).

    Use the result with `nmt translate/evaluate --checkpoint RUN_DIR/checkpoints/averaged.pt`.
    """
    from nmt.config.paths import RunPaths
    from nmt.core.locking import holding
    from nmt.runtime.checkpoint import average_newest

    run = RunPaths(run_dir)
    path = output or run.averaged
    with holding(run_dir, f"nmt average {run_dir}", create=False):
        run.writable(path)
        chosen = average_newest(run, last, path)
    typer.echo(f"Averaged {', '.join(p.name for p in chosen)} into {path}")
