"""Ensembled training (``train.members: N``): N models trained side by side, one process each,
the machine's threads shared among them, in the wall clock one model would take.

A recurrent model's small matrix products use a second CPU thread poorly: on a 2-core machine
two one-thread trainings together train about 1.7x the tokens of one two-thread training
(docs/tuning.md). Two members then cost no extra wall clock, and an ensemble of two models is a
better translator than either. Member K is an ordinary run in ``<run_dir>/member-K`` with seed
``train.seed + K - 1``, sharing the run's prepared data; translation, evaluation and the server
load the members' checkpoints as one ``Ensemble`` (``nmt.runtime.loading``).
"""

from __future__ import annotations

import copy
import multiprocessing
import os
import queue
import signal
import traceback
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from nmt.config.files import save_config
from nmt.config.paths import run_paths
from nmt.config.schema import Config
from nmt.core.errors import NmtError
from nmt.core.threads import AUTO, ThreadSetting, usable_cores
from nmt.training.callbacks import Callback
from nmt.training.state import TrainingInterrupted


@dataclass
class MemberResult:
    member: int
    outcome: str  # done, interrupted or error
    best_bleu: float = 0.0
    best_epoch: int = 0
    message: str = ""


def member_threads(config: Config) -> ThreadSetting:
    """Each member's threads: its share of a pinned train.threads (or of all torch has), or auto
    (measured up to its share of the cores: ``member_cap``)."""
    threads = config.train.threads
    if threads == AUTO:
        return AUTO
    return max(1, (threads or torch.get_num_threads()) // config.train.members)


def member_cap(config: Config) -> int:
    """The most threads a member measures with train.threads: auto: its share of this machine's cores."""
    return max(1, usable_cores() // config.train.members)


def member_config(config: Config, member: int) -> Config:
    """Member ``member`` (from 1): an ordinary one-model run of its own seed in the run's folder,
    on the run's prepared data."""
    member_cfg = copy.deepcopy(config)
    member_cfg.run_dir = str(run_paths(config).member(member).root)
    member_cfg.data.prepared_dir = str(config.prepared_dir)
    member_cfg.train.seed = config.train.seed + member - 1
    member_cfg.train.threads = member_threads(config)
    member_cfg.train.members = 1
    return member_cfg


def _train_member(
    config: Config,
    device: torch.device,
    resume: bool,
    member: int,
    results,
    callbacks: Sequence[Callback],
    thread_cap: int,
) -> None:
    """One member, in its own process (its own copy of ``callbacks``): its outcome goes to ``results``."""
    from nmt.core.locking import holding
    from nmt.training.trainer import build_trainer

    try:
        with holding(config.run_dir, f"nmt train, member-{member} (process of its own)"):
            trainer = build_trainer(
                config,
                device,
                show_bar=False,
                callbacks=callbacks,
                log_prefix=f"[member-{member}] ",
                thread_cap=thread_cap,
            )
            progress = trainer.run(resume)
        results.put(MemberResult(member, "done", progress.best_bleu, progress.best_epoch))
    except TrainingInterrupted as error:
        results.put(MemberResult(member, "interrupted", message=str(error)))
    except NmtError as error:
        results.put(MemberResult(member, "error", message=str(error)))
    except BaseException:  # the parent reports it, with the member's name
        results.put(MemberResult(member, "error", message=traceback.format_exc()))


@contextmanager
def _stop_signals_forwarded(processes: list):
    """A stop for the run (SIGTERM, SIGHUP) goes to every member, which checkpoints as one run
    does; Ctrl-C reaches them from the terminal by itself, so the parent only waits."""

    def forward(signum, _frame):
        for process in processes:
            if process.pid is not None and process.exitcode is None:
                os.kill(process.pid, signum)

    names = [name for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)]
    before = {name: signal.signal(getattr(signal, name), forward) for name in names}
    before_int = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        for name, handler in before.items():
            signal.signal(getattr(signal, name), handler)
        signal.signal(signal.SIGINT, before_int)


def train_members(
    config: Config, device: torch.device, resume: bool = False, log=print, callbacks: Sequence[Callback] = ()
) -> list[MemberResult]:
    """Train the run's members side by side, each told of its run by a copy of ``callbacks``
    (pickled into its process); raise ``TrainingInterrupted`` if a stop signal cut them short
    (each saved its checkpoint), ``NmtError`` naming the member that failed."""
    configs = [member_config(config, k) for k in range(1, config.train.members + 1)]
    threads, cap = configs[0].train.threads, member_cap(config)
    each = f"up to {cap} thread(s) each, measured" if threads == AUTO else f"{threads} thread(s) each"
    seeds = ", ".join(str(c.train.seed) for c in configs)
    log(
        f"Training {len(configs)} members side by side ({each}, seeds {seeds}) in "
        f"{config.run_dir}/member-*; translation ensembles their best checkpoints."
    )
    save_config(config, run_paths(config).config)
    context = multiprocessing.get_context("spawn")  # no fork of a process that holds torch's threads
    results = context.Queue()
    processes = [
        context.Process(
            target=_train_member,
            args=(member_cfg, device, resume, k, results, tuple(callbacks), cap),
            name=f"member-{k}",
        )
        for k, member_cfg in enumerate(configs, start=1)
    ]
    with _stop_signals_forwarded(processes):
        for process in processes:
            process.start()
        outcomes = _collect(processes, results)
    failed = [o for o in outcomes if o.outcome == "error"]
    if failed:
        raise NmtError("\n".join(f"member-{o.member} failed: {o.message}" for o in failed))
    if any(o.outcome == "interrupted" for o in outcomes):
        raise TrainingInterrupted(f"Training of the {len(configs)} members stopped; each saved its checkpoint.")
    return outcomes


def _collect(processes: list, results) -> list[MemberResult]:
    """Every member's result, in member order (a member that died without one, killed say, is
    an error naming its exit code)."""
    found: dict[int, MemberResult] = {}

    def receive(timeout: float) -> bool:
        try:
            result = results.get(timeout=timeout)
        except queue.Empty:
            return False
        found[result.member] = result
        return True

    while len(found) < len(processes):
        if receive(1.0):
            continue
        dead = [k for k, p in enumerate(processes, start=1) if k not in found and p.exitcode is not None]
        while dead and receive(0.5):  # what a member sent just before it ended
            dead = [k for k in dead if k not in found]
        for k in dead:
            found[k] = MemberResult(k, "error", message=f"ended with exit code {processes[k - 1].exitcode}")
    for process in processes:
        process.join()
    return [found[k] for k in sorted(found)]
