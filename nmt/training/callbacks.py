"""What the Trainer tells about a run as it goes, and who may stop it: the callback API.

A callback is told, on rank 0 (the only process outside torchrun):

    on_start(trainer, resumed)          the run starts, or resumes from its last checkpoint
    after_step(trainer, step)           every ``every_steps`` updates (0: never); cheap, it reads
                                        no figure from the device
    after_validation(trainer, record)   a ``ValidationRecord`` (nmt/training/metrics.py); answer a
                                        reason to stop, or None to go on
    on_end(trainer, reason)             why the run ended: the control's reason, "interrupted: ..."
                                        (a stop signal) or "failed: ..." (an error); always called

Any reason to stop ends the run there, after a checkpoint, as early stopping does (under
torchrun every rank stops with rank 0). A resumed run never hands a callback a record it saw
before: a validation redone after a resume (the run died between telling the callbacks and
its checkpoint) goes only to the callbacks that rewrite their own files on resume
(``rewrites_on_resume``: metrics.jsonl, the probes' timeline, the CSV file).

The run's own bookkeeping flows through the same list, in this order: metrics.jsonl and the
log line, TensorBoard (``train.tensorboard``), the probes' timeline (``train.probes``), early
stopping (``train.patience``), then the callbacks ``train.callbacks`` names from the
``CALLBACKS`` registry (``csv`` is built in; a plugin adds its own: nmt/core/plugins.py), then
those handed to ``train(config, device, callbacks=[...])`` (nmt/training/launch.py), which also
reach every member of ``train.members`` (they must pickle: define them at module level)::

    class StopAt30(Callback):
        def after_validation(self, trainer, record):
            return "dev BLEU reached 30" if record.dev_bleu >= 30 else None

    train(config, device, callbacks=[StopAt30()])

``nmt tune``'s pruner is one (nmt/pipelines/tune.py).
"""

from __future__ import annotations

import csv
import dataclasses
import io
from typing import ClassVar, Protocol

import torch

from nmt.config.paths import RunPaths
from nmt.config.schema import Config
from nmt.core.errors import NmtError
from nmt.core.fileio import appending, write_text_atomic
from nmt.core.registry import CALLBACKS
from nmt.data.tokenizer import Tokenizer
from nmt.model.base import TranslationModel
from nmt.training.data import TrainData
from nmt.training.metrics import MetricsFile, RunLog, ValidationRecord
from nmt.training.monitor import TensorBoardMonitor
from nmt.training.state import Progress


class Trainer(Protocol):
    """What a callback may read of the running ``Trainer`` (nmt/training/trainer.py)."""

    config: Config
    model: TranslationModel
    progress: Progress  # where the run is: epoch, step, best dev BLEU so far, ...
    run_dir: RunPaths  # its files
    log: RunLog  # a line into train.log (and the console)
    metrics: MetricsFile
    data: TrainData
    src_tok: Tokenizer
    tgt_tok: Tokenizer
    device: torch.device

    def record_probes(self, epoch: int, dev_bleu: float) -> None: ...


class Callback:
    """Subclass it and override what you need; ``trainer`` is the running Trainer."""

    every_steps: int = 0  # after_step every this many updates; 0: never
    rewrites_on_resume: bool = False  # True: it trims its own records on resume and is told a redone validation

    def on_start(self, trainer: Trainer, resumed: bool) -> None:
        """The run starts (``resumed``: from its last checkpoint, at ``trainer.progress.step``)."""

    def after_step(self, trainer: Trainer, step: int) -> None:
        """``step`` updates are done (every ``every_steps``)."""

    def after_validation(self, trainer: Trainer, record: ValidationRecord) -> str | None:
        """Told of a validation: a reason to stop the run, or None to go on."""
        return None

    def on_end(self, trainer: Trainer, reason: str) -> None:
        """The run is over, or failed: release what was opened."""


class MetricsLog(Callback):
    """Appends the record to metrics.jsonl and logs its line (resume trims the file: Trainer.restore)."""

    rewrites_on_resume = True

    def after_validation(self, trainer: Trainer, record: ValidationRecord) -> None:
        trainer.metrics.append(record.to_dict())
        where = f"epoch {record.epoch:3d}" if record.epochs is None else f"epoch {record.epochs:5.2f}"
        vocabulary = trainer.tgt_tok.vocab_size
        # e^(loss) beyond the vocabulary: the model is surer of wrong subwords than a uniform guess would be
        beyond = f" (> {vocabulary:,} subwords: worse than guessing)" if record.dev_ppl > vocabulary else ""
        trainer.log(
            f"{where}  train loss {record.train_loss:.3f}  dev loss {record.dev_loss:.3f}  "
            f"ppl {record.dev_ppl:.1f}{beyond}  BLEU {record.dev_bleu:.2f}  chrF {record.dev_chrf:.2f}  "
            f"{record.tokens_per_s:.0f} tok/s  {record.epoch_seconds:.0f}s" + ("  *best*" if record.best else "")
        )
        return None


class TensorBoardLog(Callback):
    """Scalars and attention heatmaps per validation into <run_dir>/tensorboard (train.tensorboard)."""

    def __init__(self) -> None:
        try:  # checked before training starts; the writer opens at the first validation
            import torch.utils.tensorboard  # noqa: F401
        except ImportError:
            raise NmtError("train.tensorboard needs the tensorboard package: pip install tensorboard") from None
        self.monitor: TensorBoardMonitor | None = None

    def after_validation(self, trainer: Trainer, record: ValidationRecord) -> None:
        if self.monitor is None:
            self.monitor = TensorBoardMonitor(
                trainer.run_dir.tensorboard,
                trainer.model,
                trainer.config,
                trainer.data,
                (trainer.src_tok, trainer.tgt_tok),
                trainer.device,
            )
        self.monitor.log(record.to_dict())
        return None

    def on_end(self, trainer: Trainer, reason: str) -> None:
        if self.monitor is not None:
            self.monitor.close()


class ProbeTimeline(Callback):
    """The probe sentences' translations and attention into timeline.jsonl (train.probes), once
    per epoch: the lab's timeline steps through epochs, so validations inside one are left out;
    the budget's last validation ("partial") is kept, since the best checkpoint may be its
    weights (a guided run's timeline had missed it, and its alignment with it)."""

    rewrites_on_resume = True

    def after_validation(self, trainer: Trainer, record: ValidationRecord) -> None:
        if record.kind in ("epoch", "partial"):
            trainer.record_probes(record.epoch, record.dev_bleu)
        return None


class EarlyStopping(Callback):
    """Stops after ``patience`` validations in a row without a better dev BLEU (train.patience;
    an equal BLEU at a lower dev loss is better: ``Progress.note_validation``)."""

    def __init__(self, patience: int):
        self.patience = patience

    def after_validation(self, trainer: Trainer, record: ValidationRecord) -> str | None:
        if 0 < self.patience <= trainer.progress.bad_epochs:
            return f"no dev BLEU gain in {self.patience} validations"
        return None


@CALLBACKS.register("csv")
class CsvLog(Callback):
    """Every record as a row of <run_dir>/metrics.csv (``train.callbacks: [csv]``), for a
    spreadsheet; a resumed run drops the rows its checkpoint does not include."""

    rewrites_on_resume = True
    COLUMNS: ClassVar[list[str]] = [field.name for field in dataclasses.fields(ValidationRecord)]

    def on_start(self, trainer: Trainer, resumed: bool) -> None:
        self.path = trainer.run_dir.root / "metrics.csv"
        rows = []
        if resumed and self.path.is_file():
            with open(self.path, encoding="utf-8", newline="") as handle:
                rows = [row for row in csv.DictReader(handle) if row.get("step", "").isdigit()]
            rows = [row for row in rows if MetricsFile.included(_as_record(row), trainer.progress)]
        self._write(rows)

    def after_validation(self, trainer: Trainer, record: ValidationRecord) -> None:
        with appending(self.path, newline="") as handle:
            csv.DictWriter(handle, self.COLUMNS).writerow(dataclasses.asdict(record))
        return None

    def _write(self, rows: list[dict]) -> None:
        text = io.StringIO()
        writer = csv.DictWriter(text, self.COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
        write_text_atomic(self.path, text.getvalue())


def _as_record(row: dict[str, str]) -> dict:
    """What ``MetricsFile.included`` reads of a CSV row."""
    return {"step": int(row["step"]), "epoch": int(row["epoch"]), "partial": row.get("kind") == "partial"}


def standard_callbacks(trainer: Trainer) -> list[Callback]:
    """The run's own bookkeeping as its config asks for it, then ``train.callbacks`` by name."""
    cfg = trainer.config.train
    callbacks: list[Callback] = [MetricsLog()]
    if cfg.tensorboard:
        callbacks.append(TensorBoardLog())
    if cfg.probes:
        callbacks.append(ProbeTimeline())
    if cfg.patience:
        callbacks.append(EarlyStopping(cfg.patience))
    return callbacks + [CALLBACKS[name]() for name in cfg.callbacks]
