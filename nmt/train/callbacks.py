"""What the Trainer tells about each validation, and who may stop it.

After every validation the Trainer hands the validation's record (the line it appends to
metrics.jsonl) to each of ``Trainer.callbacks`` in turn, on rank 0. A callback answers with a
reason to stop, or None to go on; any reason ends the run there, after a checkpoint, as early
stopping does (under torchrun every rank stops with rank 0). The run's own bookkeeping flows
through the same list, in this order: the metrics file and the log line, TensorBoard, the
probe sentences' timeline, early stopping. Code that trains a model adds its own::

    class StopAt30(Callback):
        def after_validation(self, trainer, record):
            return "dev BLEU reached 30" if record["dev_bleu"] >= 30 else None

    trainer = build_trainer(config, device)
    trainer.callbacks.append(StopAt30())
    trainer.run()

``nmt tune``'s pruner is one (``nmt/tune.py``).
"""

from __future__ import annotations

from nmt.errors import NmtError
from nmt.train.metrics import epochs_trained


class Callback:
    """Subclass it and override what you need; ``trainer`` is the running ``Trainer``
    (nmt.train.trainer), its ``progress``, ``model``, ``config`` and ``log`` among what it holds."""

    def after_validation(self, trainer, record: dict) -> str | None:
        """Told of a validation (rank 0): a reason to stop the run, or None to go on."""
        return None

    def close(self) -> None:
        """The run is over (or failed): release what was opened."""


class MetricsLog(Callback):
    """Appends the record to metrics.jsonl and logs its line."""

    def after_validation(self, trainer, record: dict) -> None:
        trainer.metrics.append(record)
        where = f"epoch {record['epoch']:3d}"
        if record.get("mid_epoch"):
            where = f"epoch {epochs_trained(record):5.2f}"
        trainer.log(
            f"{where}  train loss {record['train_loss']:.3f}  dev loss {record['dev_loss']:.3f}  "
            f"ppl {record['dev_ppl']:.1f}  BLEU {record['dev_bleu']:.2f}  chrF {record['dev_chrf']:.2f}  "
            f"{record['tokens_per_s']:.0f} tok/s  {record['epoch_seconds']:.0f}s"
            + ("  *best*" if record["best"] else "")
        )


class TensorBoardLog(Callback):
    """Scalars and attention heatmaps per validation into <run_dir>/tensorboard (train.tensorboard)."""

    def __init__(self):
        try:  # checked before training starts; the writer opens at the first validation
            import torch.utils.tensorboard  # noqa: F401
        except ImportError:
            raise NmtError("train.tensorboard needs the tensorboard package: pip install tensorboard") from None
        self.monitor = None

    def after_validation(self, trainer, record: dict) -> None:
        if self.monitor is None:
            from nmt.train.monitor import TensorBoardMonitor

            self.monitor = TensorBoardMonitor(
                trainer.run_dir.tensorboard,
                trainer.model,
                trainer.config,
                trainer.data,
                (trainer.src_tok, trainer.tgt_tok),
                trainer.device,
            )
        self.monitor.log(record)

    def close(self) -> None:
        if self.monitor is not None:
            self.monitor.close()


class ProbeTimeline(Callback):
    """The probe sentences' translations and attention into timeline.jsonl (train.probes), once
    per epoch: the lab's timeline steps through epochs, so validations inside one are left out."""

    def after_validation(self, trainer, record: dict) -> None:
        if not record.get("mid_epoch"):
            trainer.record_probes(record["epoch"], record["dev_bleu"])


class EarlyStopping(Callback):
    """Stops after ``patience`` validations in a row without a better dev BLEU (train.patience)."""

    def __init__(self, patience: int):
        self.patience = patience

    def after_validation(self, trainer, record: dict) -> str | None:
        if 0 < self.patience <= trainer.progress.bad_epochs:
            return f"no dev BLEU gain in {self.patience} validations"
        return None


def standard_callbacks(trainer) -> list[Callback]:
    """The run's own bookkeeping, as its config asks for it."""
    cfg = trainer.config.train
    callbacks: list[Callback] = [MetricsLog()]
    if cfg.tensorboard:
        callbacks.append(TensorBoardLog())
    if cfg.probes:
        callbacks.append(ProbeTimeline())
    if cfg.patience:
        callbacks.append(EarlyStopping(cfg.patience))
    return callbacks
