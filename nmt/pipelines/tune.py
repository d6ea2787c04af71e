"""``nmt tune``: the recipe for your corpus, your machine and your time budget, found by a study.

A study (Optuna: a seeded TPE sampler and a median pruner) searches ``tune.space`` (or
``--space FILE``; ``default_space()`` when empty). Each trial is an ordinary training run of the
config with the trial's values, for ``tune.trial_fraction`` of ``train.max_minutes``, in
``<run_dir>/tune/trial-N``; it reports its dev BLEU after every validation, and the pruner stops
one that trails the others' median. The study lives in ``<run_dir>/tune/study.journal``
(Optuna's journal file storage): ``nmt tune`` stopped (Ctrl-C ends the running trial cleanly)
and started again goes on where it was, and several workers on one machine share it; on a
cluster, ``--storage`` names an RDB (``postgresql://...``) that every node's ``nmt tune`` shares.
The best ``tune.confirm`` trials are then trained again at the full budget with each of
``tune.seeds``; the best mean dev BLEU wins and is written as ``tuned.yaml``, a plain config.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import difflib
import fcntl
import json
import multiprocessing
import statistics
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import yaml

from nmt import install_hint
from nmt.config.parsing import check_value, config_from_dict
from nmt.config.schema import Config
from nmt.core.errors import NmtError
from nmt.core.fileio import write_text_atomic
from nmt.core.registry import ARCHITECTURES
from nmt.core.threads import AUTO
from nmt.pipelines.prepare import prepare
from nmt.training.callbacks import Callback
from nmt.training.metrics import MetricsFile, ValidationRecord, epochs_trained
from nmt.training.state import TrainingInterrupted
from nmt.training.trainer import build_trainer


def aliases(config: Config) -> dict[str, tuple[str, ...]]:
    """Keys that set several at once: ``model.width``, every width of the config's family."""
    return {"model.width": tuple(f"model.{key}" for key in config.model.widths)}


def default_space(arch: str = "rnn") -> dict[str, dict]:
    """The space of a model family, as its registry entry gives it (``tune_space``)."""
    space = ARCHITECTURES[arch].tune_space()
    if space is None:
        raise NmtError(
            f"model.arch {arch!r} has no default search space for nmt tune: give one with --space FILE "
            "(docs/tuning.md)."
        )
    return space


MIN_TRIAL_MINUTES = 0.5  # a trial must have time for an epoch and a validation
# No trial is pruned before it has spent this percent of its budget: the first validations of a
# small corpus score about 0 BLEU in every trial (an eng-hin study pruned 12 of 16 trials on that
# noise after one epoch, docs/tuning.md).
PRUNE_AFTER = 40
STOPPED = "The study was stopped; its trials so far are kept. Run nmt tune again to go on."


@dataclass(frozen=True)
class Param:
    """One dimension of the search space."""

    key: str
    low: float | None = None
    high: float | None = None
    log: bool = False
    choices: tuple = ()

    def suggest(self, trial) -> Any:
        if self.choices:
            return trial.suggest_categorical(self.key, list(self.choices))
        if isinstance(self.low, int) and isinstance(self.high, int):
            return trial.suggest_int(self.key, self.low, self.high, log=self.log)
        assert self.low is not None and self.high is not None  # a range when there are no choices
        return trial.suggest_float(self.key, float(self.low), float(self.high), log=self.log)

    def values_to_check(self) -> list:
        return list(self.choices) if self.choices else [self.low, self.high]

    def holds(self, value: Any) -> bool:
        """Whether ``value`` is one this dimension can take."""
        if self.choices:
            return value in self.choices
        assert self.low is not None and self.high is not None  # a range when there are no choices
        return isinstance(value, (int, float)) and not isinstance(value, bool) and self.low <= value <= self.high


def _config_keys(config: Config) -> list[str]:
    raw = config.to_dict()
    return [f"{section}.{key}" for section, values in raw.items() if isinstance(values, dict) for key in values]


def parse_space(raw: dict, config: Config) -> list[Param]:
    """The search space, refused before anything trains when a key is not a config key (the
    closest are named), a range is empty or inverted, a choice list is empty, or a value is one
    the config would refuse for that key. A combination the config refuses (input feeding with
    Bahdanau's order) is a trial's outcome: pruned, with the reason in the report."""
    if not raw:
        raise NmtError("The search space is empty: give tune.space (or --space FILE) at least one key.")
    keys, named = _config_keys(config), aliases(config)
    params = []
    for key, spec in raw.items():
        if key not in keys and key not in named:
            close = difflib.get_close_matches(key, [*keys, *named], n=3, cutoff=0.5)
            hint = f" Did you mean {', '.join(close)}?" if close else ""
            raise NmtError(f"Search space key {key!r} is not a config key.{hint}")
        if key.startswith(("tune.", "train.max_minutes", "run_dir", "data.")):
            raise NmtError(f"Search space key {key!r}: the data, the budget and the study itself are not searched.")
        if not isinstance(spec, dict) or not ({"choices"} <= set(spec) or {"low", "high"} <= set(spec)):
            expected = "{low: x, high: y[, log: true]} or {choices: [...]}"
            raise NmtError(f"Search space key {key!r}: expected {expected}, got {spec!r}.")
        if "choices" in spec:
            if not isinstance(spec["choices"], list) or not spec["choices"]:
                raise NmtError(f"Search space key {key!r}: choices must be a non-empty list.")
            param = Param(key, choices=tuple(spec["choices"]))
        else:
            low, high, log = spec["low"], spec["high"], bool(spec.get("log", False))
            if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (low, high)):
                raise NmtError(f"Search space key {key!r}: low and high must be numbers, got {low!r} and {high!r}.")
            if not low < high:
                raise NmtError(f"Search space key {key!r}: the range [{low}, {high}] is empty or inverted.")
            if log and low <= 0:
                raise NmtError(f"Search space key {key!r}: a log range needs low > 0, got {low}.")
            param = Param(key, low, high, log)
        for value in param.values_to_check():  # each on its own (combinations are the trials' business)
            for target in named.get(key, (key,)):
                check_value(target, value, config.model.arch)
        params.append(param)
    return params


def starting_values(config: Config, params: list[Param]) -> dict[str, Any]:
    """The config's own values for the searched keys (where the space holds them): the study's
    first trial, so that the recipe a user brings is always among those compared."""
    raw = config.to_dict()
    values = {}
    for param in params:
        targets = [
            raw[section][name]
            for section, name in (t.split(".", 1) for t in aliases(config).get(param.key, (param.key,)))
        ]
        if len(set(map(str, targets))) == 1 and param.holds(targets[0]):  # model.width: only when every width agrees
            values[param.key] = targets[0]
    return values


def apply_values(config: Config, values: dict[str, Any], **top: Any) -> Config:
    """A copy of ``config`` with ``values`` (dotted keys, aliases expanded) and ``top``-level
    settings (run_dir, ...), validated as a config file would be."""
    raw = copy.deepcopy(config.to_dict())
    raw.update(top)
    for key, value in values.items():
        for target in aliases(config).get(key, (key,)):
            section, name = target.split(".", 1)
            raw[section][name] = value
    try:
        return config_from_dict(raw)
    except NmtError as error:
        raise NmtError(f"With {values}: {error}") from None


@dataclass
class Study:
    """Where a study lives, and what it trains."""

    config: Config
    params: list[Param]
    root: Path  # <run_dir>/tune
    trials: int
    workers: int
    storage: str  # "" = the journal file in root
    device: torch.device

    @property
    def minutes(self) -> float:
        return self.config.train.max_minutes

    @property
    def trial_minutes(self) -> float:
        return self.config.tune.trial_fraction * self.minutes

    def optuna_storage(self):
        import optuna
        from optuna.storages.journal import JournalFileBackend

        if self.storage:
            return optuna.storages.RDBStorage(self.storage)
        return optuna.storages.JournalStorage(JournalFileBackend(str(self.root / "study.journal")))

    def load(self, worker: int = 0):
        """The study, as worker ``worker`` sees it: each worker's sampler has a seed of its own
        (the same seed in two processes would propose the same trials)."""
        import optuna

        return optuna.create_study(
            study_name=Path(self.config.run_dir).name,
            storage=self.optuna_storage(),
            direction="maximize",
            sampler=optuna.samplers.TPESampler(seed=self.config.tune.sampler_seed + 1000 * worker),
            # steps are percent of the trial's run (run_position): trials are compared at the same
            # share of their time, whatever their speed, and none is pruned before PRUNE_AFTER
            pruner=optuna.pruners.MedianPruner(n_startup_trials=3, n_warmup_steps=PRUNE_AFTER),
            load_if_exists=True,
        )


def check_budget(config: Config) -> None:
    if not config.train.max_minutes:
        raise NmtError("nmt tune compares recipes at a budget: set train.max_minutes (or --minutes).")
    trial = config.tune.trial_fraction * config.train.max_minutes
    if trial < MIN_TRIAL_MINUTES:
        raise NmtError(
            f"A trial gets tune.trial_fraction x train.max_minutes = {trial:.2f} minutes, too short for an epoch and "
            f"a validation: raise either to give it {MIN_TRIAL_MINUTES} minutes or more."
        )


def train_run(
    study: Study, values: dict, run_dir: Path, minutes: float, seed: int, threads: int, callback: Callback | None = None
):
    """One ordinary training run of the config with ``values``: (best dev BLEU, its records), on
    ``threads`` CPU threads (with train.threads: auto, measured up to that many). Prepared data is
    shared by the runs with the same tokenizer settings (prepared once, under a lock)."""
    tokenizer = {k: v for k, v in sorted(values.items()) if k.startswith("tokenizer.")}
    prepared = study.root / ("data-" + "-".join(f"{k.split('.')[1]}{v}" for k, v in tokenizer.items()))
    config = apply_values(study.config, values, run_dir=str(run_dir))
    config.data.prepared_dir = str(prepared)
    auto = config.train.threads == AUTO
    config.train = dataclasses.replace(config.train, max_minutes=minutes, seed=seed, threads=AUTO if auto else threads)
    prepared.mkdir(parents=True, exist_ok=True)
    with open(prepared.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two workers may want the same prepared data at once
        prepare(config, log=lambda _: None, show_bar=False)
    callbacks = [callback] if callback is not None else []
    trainer = build_trainer(  # a line per trial
        config, study.device, show_bar=False, callbacks=callbacks, echo=False, thread_cap=threads if auto else None
    )
    trainer.run(resume=True)
    return trainer.progress.best_bleu, MetricsFile(trainer.run_dir.metrics).read()


def run_position(record: dict, trial_minutes: float, epochs: int) -> int:
    """How far into its run a trial was at a validation, in percent of its time budget or of its
    epochs, whichever it is further into (the run ends at the first), in steps of ten: the
    pruner's step. The pruner compares trials that reported at the same step, so nearby
    positions share one."""
    share = max(record["elapsed_seconds"] / (60 * trial_minutes), epochs_trained(record) / epochs)
    return min(100, 10 * int(10 * share))


class TrialPruner(Callback):
    """Reports each validation's dev BLEU to the trial, and stops the run when Optuna's pruner says so."""

    def __init__(self, trial, trial_minutes: float, epochs: int):
        self.trial, self.trial_minutes, self.epochs = trial, trial_minutes, epochs
        self.reported: set[int] = set()
        self.pruned_at: float | None = None  # the epochs trained when it was pruned

    def after_validation(self, trainer, record: ValidationRecord) -> str | None:
        line = record.to_dict()
        position = run_position(line, self.trial_minutes, self.epochs)
        if position not in self.reported:  # the first validation in each tenth of the run speaks for it
            self.reported.add(position)
            self.trial.report(record.dev_bleu, position)
            if self.trial.should_prune():
                self.pruned_at = epochs_trained(line)
        return None if self.pruned_at is None else "pruned by nmt tune"


def run_number(trial) -> int:
    """The trial whose run a trial trains: its own, or for a retry the first trial's (``run_of``)."""
    first = trial.user_attrs.get("run_of")
    return first if isinstance(first, int) and not isinstance(first, bool) and first >= 0 else trial.number


def trial_run_dir(study: Study, trial) -> Path:
    """A trial's run directory, always ``trial-N`` inside the study's folder (a retry resumes the
    run it retries). Never a path read from the storage: a journal someone hands you could name
    any folder, which training would then rewrite."""
    return study.root / f"trial-{run_number(trial)}"


def run_trial(study: Study, trial, threads: int) -> float:
    """Optuna's objective: a training run at the trial budget, pruned by its dev BLEU."""
    import optuna

    values = {param.key: param.suggest(trial) for param in study.params}
    run_dir = trial_run_dir(study, trial)
    trial.set_user_attr("run_dir", str(run_dir))

    pruner = TrialPruner(trial, study.trial_minutes, study.config.train.epochs)
    try:
        best, records = train_run(study, values, run_dir, study.trial_minutes, study.config.train.seed, threads, pruner)
    except TrainingInterrupted:
        trial.set_user_attr("interrupted", True)
        raise
    except NmtError as error:  # a combination the config refuses: this trial tells the sampler nothing
        trial.set_user_attr("error", str(error))
        raise optuna.TrialPruned(str(error)) from None
    trial.set_user_attr("epochs", round(epochs_trained(records[-1]), 2) if records else 0)
    trial.set_user_attr("tokens_per_s", round(statistics.fmean(r["tokens_per_s"] for r in records), 1))
    if pruner.pruned_at is not None:
        raise optuna.TrialPruned(f"pruned after epoch {pruner.pruned_at:.2f}")
    return best


def _worker(study: Study, threads: int, trials: int, worker: int = 0) -> None:
    """Run ``trials`` trials of the study (each worker its share, so that the study has exactly
    tune.trials however many run at once)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if trials > 0:
        study.load(worker).optimize(
            lambda trial: run_trial(study, trial, threads), n_trials=trials, callbacks=[_progress(study)]
        )


def _worker_process(study: Study, threads: int, trials: int, worker: int) -> None:
    """A worker in a process of its own: a stop ends its trial cleanly and exits with 130."""
    try:
        _worker(study, threads, trials, worker)
    except TrainingInterrupted:
        sys.exit(130)


def _finished(loaded) -> int:
    from optuna.trial import TrialState

    return len(loaded.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)))


def _progress(study: Study):
    """A line after each trial: its result, the best so far, and about how long the study has left."""
    started = time.monotonic()

    def line(loaded, frozen) -> None:
        finished = _finished(loaded)
        left = max(0, study.trials - finished)
        seconds = (time.monotonic() - started) / max(1, finished)
        confirm = study.config.tune.confirm * len(study.config.tune.seeds) * study.minutes
        state = "pruned" if frozen.value is None else f"dev BLEU {frozen.value:.2f}"
        best = ""
        with contextlib.suppress(ValueError):
            best = f"; best {loaded.best_value:.2f} (trial {loaded.best_trial.number})"
        print(
            f"trial {frozen.number} ({finished}/{study.trials}): {state}{best}; about "
            f"{(left * seconds / study.workers + confirm * 60) / 60:.0f} min left with the confirmation",
            flush=True,
        )

    return line


def retry_interrupted(loaded) -> int:
    """Trials a stop cut short are run again (resuming their training) when the study goes on."""
    from optuna.trial import TrialState

    retried = {t.user_attrs.get("retry_of") for t in loaded.get_trials(deepcopy=False)}
    count = 0
    for trial in loaded.get_trials(deepcopy=False, states=(TrialState.FAIL, TrialState.RUNNING)):
        if trial.user_attrs.get("interrupted") or trial.state == TrialState.RUNNING:
            if trial.number not in retried:
                attrs = {
                    "retry_of": trial.number,
                    "run_of": run_number(trial),
                    "starting": trial.user_attrs.get("starting", False),
                }
                loaded.enqueue_trial(trial.params, user_attrs=attrs)
                count += 1
            if trial.state == TrialState.RUNNING:  # its process is gone (killed): no one will finish it
                loaded._storage.set_trial_state_values(trial._trial_id, TrialState.FAIL)
    return count


def parallelism(study: Study, log) -> int:
    """Trials at once: tune.workers, or measured (once, kept in the study's folder): two
    1-thread trials at once against one trial with every thread, on this machine."""
    if study.config.tune.workers:
        return study.config.tune.workers
    threads = torch.get_num_threads()
    if threads < 2:
        return 1
    path = study.root / "parallelism.json"
    if not path.is_file():
        log(f"Measuring whether {threads} one-thread trials at once beat one {threads}-thread trial (a minute)...")
        values = {p.key: p.choices[0] if p.choices else p.low for p in study.params}
        minutes = min(0.5, study.trial_minutes)
        one = _tokens_per_second(study, values, [(study.root / "measure-1", threads)], minutes)
        singles = [(study.root / f"measure-{i}-of-{threads}", 1) for i in range(threads)]
        many = _tokens_per_second(study, values, singles, minutes)
        write_text_atomic(path, json.dumps({"one": one, "many": many, "threads": threads}))
    measured = json.loads(path.read_text(encoding="utf-8"))
    workers = measured["threads"] if measured["many"] > measured["one"] else 1
    log(
        f"{measured['threads']} one-thread trials at once train {measured['many'] / max(1.0, measured['one']):.2f}x "
        f"the tokens of one trial on every thread: {workers} worker(s) (tune.workers sets it)."
    )
    return workers


def _tokens_per_second(study: Study, values: dict, runs: list[tuple[Path, int]], minutes: float) -> float:
    """Training tokens per second of ``runs`` (run dir, threads) trained at once, summed."""
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=_measure, args=(study, values, run, threads, minutes)) for run, threads in runs]
    for process in processes:
        process.start()
    for process in processes:
        process.join()
    records = [MetricsFile(run / "metrics.jsonl").read() for run, _ in runs]
    return sum(statistics.fmean(r["tokens_per_s"] for r in rs) if rs else 0.0 for rs in records)


def _measure(study: Study, values: dict, run_dir: Path, threads: int, minutes: float) -> None:
    with contextlib.suppress(NmtError):
        train_run(study, values, run_dir, minutes, study.config.train.seed, threads)


def confirm(study: Study, loaded, log) -> tuple[dict, list[dict]]:
    """The best ``tune.confirm`` trials, and the config's own recipe (trial 0) beside them,
    trained again at the full budget with each seed: the winner's values (by mean dev BLEU), and
    every confirmed run's figures. A study that finds nothing better keeps the config's recipe."""
    from optuna.trial import TrialState

    complete = sorted(
        loaded.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)), key=lambda t: t.value, reverse=True
    )
    if not complete:
        raise NmtError(f"No trial of the study finished unpruned: nothing to confirm (see {study.root}/report.md).")
    chosen = complete[: max(1, study.config.tune.confirm)]
    chosen += [t for t in complete if t.user_attrs.get("starting") and t not in chosen]
    rows = []
    threads = torch.get_num_threads()
    for trial in chosen:
        for seed in study.config.tune.seeds:
            run_dir = study.root / f"confirm-trial-{trial.number}-seed{seed}"
            log(f"Confirming trial {trial.number} at the full budget ({study.minutes:g} min), seed {seed}...")
            best, records = train_run(study, trial.params, run_dir, study.minutes, seed, threads)
            rows.append(
                {
                    "trial": trial.number,
                    "seed": seed,
                    "dev_bleu": best,
                    "epochs": len(records),
                    "params": trial.params,
                    "run_dir": str(run_dir),
                    "starting": bool(trial.user_attrs.get("starting")),
                }
            )
    by_trial: dict[int, list[float]] = {}
    for row in rows:
        by_trial.setdefault(row["trial"], []).append(row["dev_bleu"])
    winner = next(t for t in chosen if t.number == max(by_trial, key=lambda n: statistics.fmean(by_trial[n])))
    if winner.user_attrs.get("starting"):
        log(f"The config's own recipe (trial {winner.number}) confirmed best: tuned.yaml keeps its values.")
    return winner.params, rows


def write_tuned(study: Study, values: dict, rows: list[dict]) -> Path:
    """``tuned.yaml``: the config with the winner's values, a plain config nmt train accepts."""
    tuned = apply_values(study.config, values, run_dir=f"{study.config.run_dir}-tuned")
    raw = tuned.to_dict()
    raw.pop("tune")
    raw["init_from"] = raw["init_from"] or None
    raw = {k: v for k, v in raw.items() if v is not None}
    winner = [r for r in rows if r["params"] == values]
    kept = " The config's own recipe won: these are its values." if any(r["starting"] for r in winner) else ""
    header = (
        f"# Found by `nmt tune` on {time.strftime('%Y-%m-%d')}: {study.trials} trials of "
        f"{study.trial_minutes:g} minutes ({study.config.tune.trial_fraction:g} of the {study.minutes:g}-minute "
        f"budget), TPE sampler seed {study.config.tune.sampler_seed}, median pruning; the best "
        f"{study.config.tune.confirm} and the config's own recipe trained again at {study.minutes:g} minutes with "
        f"seeds {', '.join(map(str, study.config.tune.seeds))}. This one's dev BLEU: "
        + ", ".join(f"{r['dev_bleu']:.2f}" for r in winner)
        + f".{kept}\n# Its values: {json.dumps(values)}\n"
    )
    path = study.root / "tuned.yaml"
    write_text_atomic(path, header + yaml.safe_dump(raw, sort_keys=False, allow_unicode=True))
    return path


def write_report(study: Study, loaded, rows: list[dict]) -> Path:
    """report.md: every trial (values, dev BLEU, epochs, tokens/s, pruned or not), the
    confirmation, and Optuna's optimisation history and parameter importances as pictures."""
    keys = [p.key for p in study.params]
    lines = [
        f"# nmt tune: {study.config.run_dir}",
        "",
        f"{study.trials} trials of {study.trial_minutes:g} minutes (trial 0: the config as it is); the best and the "
        f"config's own confirmed at {study.minutes:g} minutes.",
        "",
        "| trial | state | dev BLEU | epochs | tokens/s | " + " | ".join(keys) + " |",
        "|---:|---|---:|---:|---:|" + "---|" * len(keys),
    ]
    for trial in loaded.get_trials(deepcopy=False):
        value = "" if trial.value is None else f"{trial.value:.2f}"
        if trial.state.name == "PRUNED" and trial.intermediate_values:
            value = f"({max(trial.intermediate_values.values()):.2f})"
        cells = [_cell(trial.params.get(k, "")) for k in keys]
        own = " (the config's own)" if trial.user_attrs.get("starting") else ""
        lines.append(
            f"| {trial.number}{own} | {trial.state.name.lower()} | {value} | {trial.user_attrs.get('epochs', '')} | "
            f"{trial.user_attrs.get('tokens_per_s', '')} | " + " | ".join(cells) + " |"
        )
    if rows:
        lines += ["", "Confirmed at the full budget:", "", "| trial | seed | dev BLEU | epochs |"]
        lines.append("|---:|---:|---:|---:|")
        lines += [f"| {r['trial']} | {r['seed']} | {r['dev_bleu']:.2f} | {r['epochs']} |" for r in rows]
    for name, plot in (("history", "plot_optimization_history"), ("importances", "plot_param_importances")):
        if _save_plot(loaded, plot, study.root / f"{name}.png"):
            lines += ["", f"![{name}]({name}.png)"]
    path = study.root / "report.md"
    write_text_atomic(path, "\n".join(lines) + "\n")
    return path


def _cell(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _save_plot(loaded, name: str, path: Path) -> bool:
    import matplotlib.pyplot as plt  # Optuna draws through pyplot; the backend stays the user's own
    from optuna.visualization import matplotlib as plots

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Optuna marks its matplotlib plots experimental
            axes = getattr(plots, name)(loaded)
    except (ValueError, RuntimeError):  # too few finished trials for importances, say
        return False
    axes.figure.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(axes.figure)
    return True


def hparams(study: Study, rows: list[dict]) -> None:
    """The confirmed runs in TensorBoard's HParams view (when tensorboard is installed)."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        return
    with SummaryWriter(str(study.root / "tensorboard")) as writer:
        for row in rows:
            values = {k: v if isinstance(v, (int, float, str, bool)) else str(v) for k, v in row["params"].items()}
            writer.add_hparams(
                {**values, "seed": row["seed"]}, {"dev_bleu": row["dev_bleu"]}, run_name=Path(row["run_dir"]).name
            )


def tune(config: Config, device: torch.device, space: dict | None = None, storage: str = "", log=print) -> Path:
    """Run (or go on with) the study of ``config``; confirm; write tuned.yaml and report.md."""
    try:
        import optuna  # noqa: F401
    except ImportError:
        raise NmtError(f"nmt tune needs Optuna: {install_hint('tune', 'optuna')}.") from None
    check_budget(config)
    params = parse_space(space or config.tune.space or default_space(config.model.arch), config)
    root = Path(config.run_dir) / "tune"
    root.mkdir(parents=True, exist_ok=True)
    study = Study(config, params, root, config.tune.trials, 1, storage, device)
    loaded = study.load()
    if not loaded.trials:  # trial 0: the config as it is (what the study must beat)
        loaded.enqueue_trial(starting_values(config, params), user_attrs={"starting": True})
    retried = retry_interrupted(loaded)
    if retried:
        done = _finished(loaded)
        log(f"Going on with the study in {root}: {done} trial(s) done, {retried} interrupted one(s) again.")
    study.workers = parallelism(study, log)
    threads = max(1, torch.get_num_threads() // study.workers)
    log(
        f"{study.trials} trials of {study.trial_minutes:g} min over {len(params)} settings, "
        f"{study.workers} at once with {threads} thread(s) each; then the best {config.tune.confirm} "
        f"at {study.minutes:g} min with seeds {config.tune.seeds}."
    )
    remaining = max(0, study.trials - _finished(loaded))
    shares = [remaining // study.workers + (i < remaining % study.workers) for i in range(study.workers)]
    if study.workers == 1:
        _worker(study, threads, remaining)
    else:
        _parallel_workers(study, threads, shares)
    rows: list = []
    if config.tune.confirm:
        values, rows = confirm(study, loaded, log)
    else:
        values = loaded.best_trial.params
    tuned = write_tuned(study, values, rows)
    report = write_report(study, loaded, rows)
    hparams(study, rows)
    log(f"Tuned config: {tuned}\nReport: {report}")
    return tuned


def _parallel_workers(study: Study, threads: int, shares: list[int]) -> None:
    context = multiprocessing.get_context("spawn")
    processes = [
        context.Process(target=_worker_process, args=(study, threads, share, worker))
        for worker, share in enumerate(shares)
    ]
    for process in processes:
        process.start()
    try:
        for process in processes:
            process.join()
    except KeyboardInterrupt:  # each worker got the Ctrl-C too, and checkpoints its trial
        for process in processes:
            process.join()
        raise TrainingInterrupted(STOPPED) from None
    if any(process.exitcode for process in processes):
        codes = [process.exitcode for process in processes]
        if 130 in codes:
            raise TrainingInterrupted(STOPPED)
        raise NmtError(f"A worker of the study failed (exit codes {codes}); see the trials' train.log in {study.root}.")
