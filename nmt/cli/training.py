"""``nmt train``: one model, or its members, trained over one config (preparing the data first)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Annotated

import typer

from nmt.cli.common import (
    ConfigOption,
    DeviceOption,
    InitFromOption,
    MinutesOption,
    SetOption,
    command_config,
    device_of,
    draw_learning_curves,
    finite_minutes,
    user_errors,
    writing_run,
)
from nmt.config.schema import Config
from nmt.core.errors import NmtError


@user_errors
def train(
    config: ConfigOption,
    set_: SetOption = None,
    resume: Annotated[
        bool,
        typer.Option("--resume", help="Continue from <run_dir>/checkpoints/last.pt (starts fresh if there is none)."),
    ] = False,
    device: DeviceOption = None,
    minutes: MinutesOption = None,
    init_from: InitFromOption = None,
) -> None:
    """Train the model on the prepared data (prepares it first if needed).

    Validates on the dev set every epoch, and every train.validate_every steps if set (loss,
    perplexity, greedy BLEU/chrF against all references), lowers the learning rate when dev BLEU
    stalls, stops early after train.patience validations without a gain or at the time budget
    (--minutes), and keeps checkpoints 'last' and 'best'. Logs to <run_dir>/train.log and metrics.jsonl.
    """
    from nmt.config.paths import RunPaths
    from nmt.training import distributed
    from nmt.training.launch import keep_the_runs_budget, refuse_new_run_over_old
    from nmt.training.launch import train as train_models
    from nmt.training.metrics import MetricsFile, RunSummary
    from nmt.training.state import TrainingInterrupted

    cfg = command_config(config, set_)
    cfg.init_from = init_from or cfg.init_from
    if minutes is not None:
        cfg.train.max_minutes = finite_minutes(minutes)
    elif resume:
        keep_the_runs_budget(cfg, set_, log=lambda msg: typer.echo(msg, err=True))
    requested = device_of(cfg, device)
    ddp = distributed.setup(requested, cfg.train.ddp_timeout_minutes)  # under torchrun: join the process group
    try:
        with contextlib.ExitStack() as held:
            if ddp.is_main:  # the ranks of one torchrun share the run: rank 0 holds it for them
                held.enter_context(writing_run(cfg, f"nmt train --config {config}" + (" --resume" if resume else "")))
                refuse_new_run_over_old(cfg, resume)  # before prepare can touch the run's files
            _prepare_for_training(cfg, ddp)
            try:
                trained = train_models(cfg, requested, resume, ddp, log=lambda msg: typer.echo(msg, err=True))
            except TrainingInterrupted as exc:
                if ddp.is_main:
                    _say_how_to_resume(exc, cfg, config, set_)
                raise typer.Exit(130) from None
            if ddp.is_main:
                for model in trained:
                    draw_learning_curves(model.run_dir)
    finally:
        distributed.teardown(ddp)
    if not ddp.is_main:
        return
    for model in trained:
        summary = RunSummary.of(MetricsFile(RunPaths(model.run_dir).metrics).read())
        told = summary.best_line() if summary else "no validation"
        told = f"{model.run_dir.name}: {told}" if len(trained) > 1 else told[0].upper() + told[1:]
        typer.echo(f"{told}; learning curves in {RunPaths(model.run_dir).learning_curves}")
    if len(trained) > 1:
        typer.echo(f"Translation and evaluation of {cfg.run_dir} ensemble the members' best checkpoints.")


def _say_how_to_resume(stopped: Exception, cfg: Config, config: Path, set_: list[str] | None) -> None:
    from nmt.config.paths import run_paths

    run = run_paths(cfg)
    again = " ".join(["nmt train --config", str(config), *[f"--set {item}" for item in set_ or []], "--resume"])
    saved = run.checkpoint("last") if cfg.train.members == 1 else run.root / "member-*/checkpoints/last.pt"
    typer.echo(f"{stopped} Checkpoint saved: {saved}.\nResume with: {again}", err=True)


def _prepare_for_training(cfg: Config, ddp) -> None:
    """Prepare the data if needed (rank 0), and make sure every rank sees it; first, eflomal where a
    setting runs it (a probe trained a whole epoch before finding it missing)."""
    from nmt.pipelines.prepare import is_prepared
    from nmt.pipelines.prepare import prepare as run_prepare
    from nmt.training.align_probe import check_aligner

    check_aligner(cfg)
    if ddp.is_main:
        report = run_prepare(cfg, log=lambda msg: typer.echo(msg, err=True))
        if not report.reused:
            typer.echo(report.summary())
    ddp.barrier()
    if not is_prepared(cfg):
        raise NmtError(f"Prepared data missing in {cfg.prepared_dir} after rank 0 prepared it: is it on a shared disk?")
