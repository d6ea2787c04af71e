"""One way to train from code: ``train(config, device)`` trains the config's model, or its
``train.members`` side by side, and says where each trained model is. The CLI, the scripts and
the tests call it; ``build_trainer`` (trainer.py) is the layer below, for code that wants the
Trainer itself (its callbacks, its metrics)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
import yaml

from nmt.config.parsing import parse_override
from nmt.config.paths import run_paths
from nmt.config.schema import Config
from nmt.core.errors import NmtError
from nmt.core.locking import holding
from nmt.training.callbacks import Callback
from nmt.training.distributed import Distributed


@dataclass
class TrainedModel:
    """One trained model: its run folder (``<run_dir>``, or ``<run_dir>/member-K``) and best dev score."""

    run_dir: Path
    best_bleu: float
    best_epoch: int


def refuse_new_run_over_old(config: Config, resume: bool) -> None:
    """A new run (no ``resume``) where one was trained is refused before anything is prepared or
    written (the Trainer refuses too, but only once it is built, after ``nmt train`` has prepared)."""
    run = run_paths(config)
    found = run.trained_checkpoints()
    if found and not resume:
        raise NmtError(
            f"{run.root} already holds a training run ({found[0]}). Pass --resume to continue it, "
            f"or choose another run_dir (--set run_dir=...). Nothing was changed."
        )


def train(
    config: Config,
    device: torch.device,
    resume: bool = False,
    ddp: Distributed | None = None,
    show_bar: bool = True,
    log=print,
    callbacks: Sequence[Callback] = (),
) -> list[TrainedModel]:
    """Train ``config``'s model (or, with ``train.members: N``, its N members side by side) and
    return the trained models. ``callbacks`` are told of the run (nmt/training/callbacks.py); each
    member gets its own copy. Raises ``TrainingInterrupted`` when a stop signal cut the run
    short (checkpointed: call again with ``resume=True``)."""
    from nmt.training.members import train_members
    from nmt.training.trainer import build_trainer

    run = run_paths(config)
    ddp = ddp or Distributed()
    # one writer per run (nmt/core/locking.py; the command that called this may hold it already)
    with holding(run.root, "train (Python)") if ddp.is_main else contextlib.nullcontext():
        if config.train.members > 1:
            if ddp.world > 1:
                raise NmtError("train.members trains several models in processes of its own: run it without torchrun.")
            results = train_members(config, device, resume, log=log, callbacks=callbacks)
            return [TrainedModel(run.member(r.member).root, r.best_bleu, r.best_epoch) for r in results]
        progress = build_trainer(config, ddp.device(device), ddp, show_bar, callbacks).run(resume)
    ddp.barrier()  # leave together: a rank tearing down while another still runs can abort it (gloo)
    return [TrainedModel(run.root, progress.best_bleu, progress.best_epoch)]


BUDGET_KEYS = ("max_minutes",)  # the time budget; an epoch cap is the file's, as any other setting


def keep_the_runs_budget(cfg: Config, overrides: list[str] | None, log: Callable[[str], object]) -> None:
    """A resumed run without a new budget (``--resume`` without ``--minutes``): the budget the
    run was started with (its own config.yaml, ``--set`` included), not what the config file says
    now, unless an override (``--set``) gives one again. (Before, a run started with --set
    train.max_minutes=1 resumed to the file's 5 minutes.)"""
    run = run_paths(cfg)
    if not run.config.is_file() or not run.trained_checkpoints():
        return
    given = {parse_override(text)[0] for text in overrides or []}
    saved = yaml.safe_load(run.config.read_text(encoding="utf-8"))
    train: dict = saved["train"] if isinstance(saved, dict) and isinstance(saved.get("train"), dict) else {}
    for key in BUDGET_KEYS:
        value = train.get(key)
        if f"train.{key}" in given or value is None or value == getattr(cfg.train, key):
            continue
        log(
            f"Resuming with the run's own train.{key}: {value} (from {run.config}; the config file says "
            f"{getattr(cfg.train, key)}). --minutes M or --set train.{key}=... changes it (the budget counts the "
            "whole run, resumes included)."
        )
        setattr(cfg.train, key, type(getattr(cfg.train, key))(value))
