"""What a run writes down: ``<run_dir>/train.log`` (``RunLog``) and ``metrics.jsonl``.

``<run_dir>/metrics.jsonl``: one JSON record per validation (epoch, step, losses, dev BLEU
and chrF, learning rate, tokens/s, gradient norm, times, whether it was the best so far;
``epochs`` and ``mid_epoch`` or ``partial`` on a validation inside an epoch). Written by training, read by
``nmt plot``, the end-of-training summary and experiment scripts.

The training log: lines to the console (above any progress bar) and to the file.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from nmt.core.errors import NmtError
from nmt.core.fileio import appending, write_lines_atomic
from nmt.training.state import Progress


@dataclass
class ValidationRecord:
    """One validation, as the Trainer hands it to each callback's ``after_validation`` and as
    ``metrics.jsonl`` keeps it (``to_dict`` is the line). Losses are per target token; seconds
    of training count this epoch's share inside an epoch."""

    epoch: int  # the epoch being trained (1-based)
    step: int  # optimizer updates so far
    train_loss: float  # this epoch's mean so far
    dev_loss: float
    dev_ppl: float
    dev_bleu: float  # greedy search, all references (of the EMA weights when they did better)
    dev_chrf: float
    lr: float  # the learning rate of the last step
    tokens_per_s: float  # target tokens per second of training, this epoch
    grad_norm: float  # mean gradient norm before clipping, this epoch's finite steps
    epoch_seconds: float
    train_seconds: float  # training time of the run so far, validations and checkpoints not counted
    elapsed_seconds: float  # of the time budget: everything the run spent, earlier sessions included
    best: bool  # the best dev BLEU so far: best.pt points at this validation's checkpoint
    kind: str = "epoch"  # "epoch" (its end), "mid_epoch" (train.validate_every), "partial" (the budget ended it)
    epochs: float | None = None  # inside an epoch: epochs trained, with the fraction (2.4)
    threads: int | None = None  # CPU threads the last step ran with (train.threads: auto chooses them)
    raw_dev_bleu: float | None = None  # with train.ema_decay: the raw weights' dev BLEU
    ema_dev_bleu: float | None = None  # and the averaged weights'

    def to_dict(self) -> dict[str, Any]:
        """The metrics.jsonl line: the keys in this order, the optional ones only when set."""
        line: dict[str, Any] = {"epoch": self.epoch, "step": self.step, "train_loss": self.train_loss}
        line |= {"dev_loss": self.dev_loss, "dev_ppl": self.dev_ppl, "dev_bleu": self.dev_bleu}
        line["dev_chrf"] = self.dev_chrf
        if self.raw_dev_bleu is not None:
            line |= {"raw_dev_bleu": self.raw_dev_bleu, "ema_dev_bleu": self.ema_dev_bleu}
        for name in ("lr", "tokens_per_s", "grad_norm", "epoch_seconds", "train_seconds", "elapsed_seconds", "best"):
            line[name] = getattr(self, name)
        if self.threads is not None:
            line["threads"] = self.threads
        if self.kind != "epoch":
            line |= {"epochs": self.epochs, self.kind: True}
        return line


def epochs_trained(record: dict) -> float:
    """The epochs trained when a record was taken: 3 at the end of the third, 2.4 inside the
    third (train.validate_every, or a validation the time budget forced)."""
    return record.get("epochs", record["epoch"])


def epochs_label(epochs: float) -> str:
    """7 -> "7", 6.5 -> "6.50": how every report writes a count of epochs."""
    return f"{epochs:g}" if float(epochs).is_integer() else f"{epochs:.2f}"


@dataclass(frozen=True)
class RunSummary:
    """A run told from its records, the one count the console's last lines, ``nmt train``'s
    summary, ``nmt plot`` and the model card all give (before, each counted on its own: "epoch
    6.50" on the last line, "best at epoch 7" below it, "7 epochs" from nmt plot)."""

    epochs: float  # trained, a partial last one included (6.5)
    validations: int
    train_seconds: float  # of the whole run, resumes included
    best_bleu: float
    best_epochs: float  # when the best validation was taken
    best_seconds: float  # training seconds up to it

    @classmethod
    def of(cls, records: list[dict]) -> RunSummary | None:
        if not records:
            return None
        flagged = [r for r in records if r.get("best")]  # the last is the validation best.pt holds
        best = flagged[-1] if flagged else max(records, key=lambda r: r["dev_bleu"])
        last = records[-1]
        return cls(
            epochs_trained(last),
            len(records),
            last["train_seconds"],
            best["dev_bleu"],
            epochs_trained(best),
            best["train_seconds"],
        )

    def best_line(self) -> str:
        return (
            f"best dev BLEU {self.best_bleu:.2f} at epoch {epochs_label(self.best_epochs)} "
            f"(after {self.best_seconds:.0f} s of training)"
        )

    def trained_line(self) -> str:
        seconds = f"{self.train_seconds:.0f} s of training"
        validations = f"{self.validations} validation" + ("s" if self.validations != 1 else "")
        return f"{epochs_label(self.epochs)} epochs, {seconds}, {validations}"


class MetricsFile:
    """Records appended one line each. A crash (or a VM that dies) mid-write can leave a last
    line cut short: readers skip it, and the next append or trim drops it."""

    def __init__(self, path: Path):
        self.path = path

    def read(self) -> list[dict]:
        """Every record so far (none if the file does not exist yet)."""
        if not self.path.is_file():
            return []
        complete, _, tail = self.path.read_bytes().rpartition(b"\n")  # every whole record ends in LF
        records = []
        for number, line in enumerate(complete.decode("utf-8", errors="replace").split("\n"), start=1):
            if line.strip():
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError as error:
                    raise NmtError(f"{self.path}, line {number}: not a JSON record ({error.msg}).") from None
        with contextlib.suppress(ValueError):  # a tail cut short by a crash is no record
            records.append(json.loads(tail.decode("utf-8")))
        return records

    def append(self, record: dict) -> None:
        self._drop_cut_tail()
        with appending(self.path) as handle:
            handle.write(json.dumps(record) + "\n")

    def trim(self, progress: Progress) -> None:
        """On resume: drop the records the checkpoint resumed does not include."""
        if self.path.is_file():
            write_lines_atomic(self.path, (json.dumps(r) for r in self.read() if self.included(r, progress)))

    @staticmethod
    def included(record: dict, progress: Progress) -> bool:
        """Whether a checkpoint at ``progress`` includes ``record``: not a validation after its step,
        nor one the budget forced inside the epoch it goes on with (that epoch's end is validated again)."""
        return record["step"] <= progress.step and not (record.get("partial") and record["epoch"] > progress.epoch)

    def reset(self) -> None:
        """A new run starts without the records of an old one."""
        self.path.unlink(missing_ok=True)

    def _drop_cut_tail(self) -> None:
        """Cut the file after its last LF, so that a record never continues a line a crash left."""
        if self.path.is_symlink() or not self.path.is_file() or self.path.stat().st_size == 0:
            return  # a link is refused by the append that follows, its target untouched
        with open(self.path, "r+b") as handle:
            handle.seek(-1, 2)
            if handle.read(1) == b"\n":
                return
            handle.seek(0)
            handle.truncate(handle.read().rfind(b"\n") + 1)


class RunLog:
    """Timestamped lines to ``path``, echoed to the console; silent when not ``enabled``
    (processes other than rank 0)."""

    def __init__(self, path: Path, echo: bool = True, enabled: bool = True, prefix: str = ""):
        self.path = path
        self.echo = echo
        self.enabled = enabled
        self.prefix = prefix  # on the console only: whose line it is when several runs share one (train.members)
        if enabled:
            path.parent.mkdir(parents=True, exist_ok=True)

    def __call__(self, message: str) -> None:
        if not self.enabled:
            return
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        with appending(self.path) as handle:
            handle.write(f"{stamp} {message}\n")
        if self.echo:
            tqdm.write(self.prefix + message, file=sys.stderr)  # a log line: stdout holds the command's results
