"""Training: one step, one epoch, validation, and the run loop, each its own function."""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm import tqdm

from nmt.config import Config, TrainConfig, save_config
from nmt.data.batching import Batch, Example, collate, padding_fraction, sorted_batches
from nmt.errors import NmtError
from nmt.evaluation import score
from nmt.fileio import read_lines, write_lines_atomic
from nmt.hardware import hardware_description
from nmt.model.seq2seq import Seq2Seq, count_parameters
from nmt.tokenizer import PAD_ID, Tokenizer
from nmt.train.checkpoint import check_compatible, checkpoint_path, load_checkpoint, save_training_checkpoint
from nmt.train.data import TrainData, batch_lengths, epoch_batches, iterate_batches, load_train_data, loader_workers
from nmt.train.distributed import Distributed
from nmt.train.state import Progress, StopFlag, TrainingInterrupted, rng_state, seed_everything, set_rng_state
from nmt.translate import Translator, load_tokenizers


@dataclass
class EpochStats:
    loss: float  # mean per target token
    tokens: int
    seconds: float
    grad_norm: float = 0.0  # mean gradient norm (before clipping) of the epoch's finite steps

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0


class RunLog:
    """Lines to the console (above any progress bar) and to <run_dir>/train.log; silent
    when not ``enabled`` (processes other than rank 0)."""

    def __init__(self, path: Path, echo: bool = True, enabled: bool = True):
        self.path = path
        self.echo = echo
        self.enabled = enabled
        if enabled:
            path.parent.mkdir(parents=True, exist_ok=True)

    def __call__(self, message: str) -> None:
        if not self.enabled:
            return
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(f"{stamp} {message}\n")
        if self.echo:
            tqdm.write(message)


def token_loss(logits: torch.Tensor, targets: torch.Tensor, label_smoothing: float = 0.0) -> torch.Tensor:
    """Summed cross-entropy over non-pad target tokens; logits (B, T, V), targets (B, T)."""
    return F.cross_entropy(
        logits.reshape(-1, logits.size(-1)).float(),
        targets.reshape(-1),
        ignore_index=PAD_ID,
        reduction="sum",
        label_smoothing=label_smoothing,
    )


def autocast_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype for train.precision on ``device`` (None: plain float32)."""
    if precision == "bf16" or (precision == "auto" and device.type == "cuda" and torch.cuda.is_bf16_supported()):
        return torch.bfloat16
    return None


class StepResult(NamedTuple):
    loss_sum: torch.Tensor  # summed token loss (device tensor)
    nonfinite: torch.Tensor  # bool: the update was skipped
    grad_norm: torch.Tensor  # gradient norm before clipping


def train_step(
    model: Seq2Seq,
    batch: Batch,
    optimizer: torch.optim.Optimizer,
    cfg: TrainConfig,
    tokens: int,
    amp_dtype: torch.dtype | None = None,
) -> StepResult:
    """One update on ``batch``. Returns the loss, whether it was skipped, and the gradient
    norm, as device tensors (no host sync).

    A non-finite loss or gradient norm skips the update: on CUDA the fused optimizer reads
    the flag as ``found_inf`` on the device (no host sync); elsewhere it is checked on the
    host, which costs nothing on a CPU.
    With ``amp_dtype`` the forward pass runs under autocast; the loss is computed in float32.
    """
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(batch.src.device.type, dtype=amp_dtype or torch.bfloat16, enabled=amp_dtype is not None):
        logits, _ = model(batch.src, batch.src_lengths, batch.tgt_in, cfg.teacher_forcing)
    loss_sum = token_loss(logits, batch.tgt_out, cfg.label_smoothing)
    (loss_sum / tokens).backward()
    max_norm = cfg.clip_grad_norm if cfg.clip_grad_norm > 0 else float("inf")
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    nonfinite = ~(torch.isfinite(grad_norm) & torch.isfinite(loss_sum))
    if loss_sum.is_cuda and optimizer.defaults.get("fused"):
        optimizer.found_inf = nonfinite.float()
        optimizer.step()
    elif not bool(nonfinite):
        optimizer.step()
    return StepResult(loss_sum.detach(), nonfinite, grad_norm.detach())


def train_epoch(
    model: Seq2Seq,
    examples: list[Example],
    optimizer: torch.optim.Optimizer,
    cfg: TrainConfig,
    epoch: int,
    device: torch.device,
    progress: Progress,
    save: Callable[[], None] = lambda: None,
    stop: StopFlag | None = None,
    show_bar: bool = True,
    ddp: Distributed = Distributed(),
) -> EpochStats:
    """One pass over the training data in bucketed, seeded-shuffled batches.

    Starts at ``progress.batch_in_epoch`` (resuming mid-epoch); calls ``save`` every
    ``cfg.checkpoint_every`` steps and, then raising ``TrainingInterrupted``, when ``stop``
    is set. Steps with a non-finite loss or gradient are skipped and counted; too many in
    a row end training with an error. Under ``ddp`` each process trains on its share of
    every global batch, the loss normalised by the global token count.
    """
    model.train()
    amp_dtype = autocast_dtype(cfg.precision, device)
    batches = epoch_batches(examples, cfg, epoch, ddp.world)
    total_loss = torch.tensor(progress.epoch_loss, device=device, dtype=torch.float64)
    good_tokens = torch.tensor(progress.epoch_tokens, device=device, dtype=torch.float64)
    in_a_row = torch.zeros((), device=device)
    skipped = torch.zeros((), device=device)
    norm_sum = torch.zeros((), device=device, dtype=torch.float64)  # this session's finite steps
    norm_steps = torch.zeros((), device=device)
    check_every = 1 if device.type == "cpu" else 20  # reading counters syncs the GPU: not every step
    start = time.perf_counter() - progress.epoch_seconds

    def record_partial() -> None:
        progress.epoch_loss = total_loss.item()
        progress.epoch_tokens = int(good_tokens.item())
        progress.epoch_seconds = time.perf_counter() - start
        progress.nonfinite_steps += int(skipped.item())
        skipped.zero_()

    bar = tqdm(total=len(batches), initial=progress.batch_in_epoch, desc=f"epoch {epoch}", unit="batch",
               disable=not show_bar, leave=False)  # fmt: skip
    first = progress.batch_in_epoch + 1
    loaded = iterate_batches(examples, batches[first - 1 :], ddp, loader_workers(cfg, device), device.type == "cuda")
    for number, batch in enumerate(loaded, start=first):
        tokens = batch.num_tgt_tokens
        normalizer = ddp.global_tokens(tokens, device) / ddp.world  # DDP averages gradients over ranks
        try:
            loss_sum, nonfinite, grad_norm = train_step(model, batch.to(device), optimizer, cfg, normalizer, amp_dtype)
        except torch.cuda.OutOfMemoryError:
            raise NmtError(
                f"CUDA ran out of memory at epoch {epoch}, batch {number} ({len(batches[number - 1])} sentences, "
                f"{tokens} target tokens). Lower train.batch_size (now {cfg.batch_size}) or set train.batch_tokens "
                f"(now {cfg.batch_tokens or 'off'}) to cap padded tokens per batch, then resume with --resume."
            ) from None
        total_loss += torch.where(nonfinite, 0.0, loss_sum.double())
        good_tokens += torch.where(nonfinite, 0.0, float(tokens))
        in_a_row = (in_a_row + 1) * nonfinite
        skipped += nonfinite
        norm_sum += torch.where(nonfinite, 0.0, grad_norm.double())
        norm_steps += ~nonfinite
        progress.step += 1
        progress.batch_in_epoch = number
        bar.update(1)
        if number % check_every == 0 and in_a_row.item() >= cfg.max_nonfinite:
            raise NmtError(
                f"Training stopped at epoch {epoch}, step {progress.step}: {int(in_a_row.item())} steps in a row had a "
                "non-finite loss or gradient (skipped). Lower train.learning_rate or check the data; "
                "--resume continues from the last checkpoint."
            )
        if number % 20 == 0 or number == len(batches):  # reading the loss syncs: not every step
            seconds = time.perf_counter() - start
            bar.set_postfix(loss=f"{total_loss.item() / max(1.0, good_tokens.item()):.3f}",
                            tok_s=f"{good_tokens.item() / seconds:.0f}")  # fmt: skip
        if ddp.any(bool(stop), device):
            record_partial()
            save()
            raise TrainingInterrupted(
                f"Training stopped by {(stop and stop.signal_name) or 'a signal'} at epoch {epoch}, step {progress.step}."
            )
        if cfg.checkpoint_every and progress.step % cfg.checkpoint_every == 0 and number < len(batches):
            record_partial()
            save()
    bar.close()
    record_partial()
    stats = EpochStats(
        progress.epoch_loss / max(1, progress.epoch_tokens),
        progress.epoch_tokens,
        progress.epoch_seconds,
        norm_sum.item() / max(1.0, norm_steps.item()),
    )
    progress.batch_in_epoch, progress.epoch_loss, progress.epoch_tokens, progress.epoch_seconds = 0, 0.0, 0, 0.0
    return stats


@torch.no_grad()
def dev_loss(model: Seq2Seq, examples: list[Example], batch_size: int, device: torch.device) -> float:
    """Mean per-token cross-entropy on ``examples`` (teacher forcing, no dropout)."""
    model.eval()
    total, tokens = 0.0, 0
    for indices in sorted_batches([len(ex.src_ids) for ex in examples], batch_size):
        batch = collate([examples[i] for i in indices]).to(device)
        logits, _ = model(batch.src, batch.src_lengths, batch.tgt_in)
        total += token_loss(logits, batch.tgt_out).item()
        tokens += batch.num_tgt_tokens
    return total / max(1, tokens)


def validate(translator: Translator, data: TrainData, cfg: TrainConfig) -> dict:
    """Dev loss, perplexity, and greedy BLEU/chrF against every dev reference."""
    loss = dev_loss(translator.model, data.dev, cfg.batch_size, translator.device)
    hyp_ids = translator.translate_ids(data.dev_sources, beam_size=1)
    hypotheses = translator.tgt_tok.decode(hyp_ids)
    scores = score(hypotheses, data.dev_references, metrics=("bleu", "chrf"))
    return {"dev_loss": loss, "dev_ppl": math.exp(min(loss, 50)), "dev_bleu": scores["bleu"], "dev_chrf": scores["chrf"]}


def make_adam(parameters: list[torch.nn.Parameter], learning_rate: float) -> torch.optim.Adam:
    """Adam with the fused kernel where this PyTorch has it for the device (CPU: 2 ms per step
    against 14 ms for the per-parameter loop on the eng-mar model), else the foreach one."""
    try:
        return torch.optim.Adam(parameters, lr=learning_rate, fused=True)
    except (RuntimeError, TypeError, ValueError):
        return torch.optim.Adam(parameters, lr=learning_rate, foreach=True)


def build_training(config: Config, src_tok: Tokenizer, tgt_tok: Tokenizer, device: torch.device):
    model = Seq2Seq(config.model, src_tok.vocab_size, tgt_tok.vocab_size).to(device)
    if config.train.compile != "none":
        model.decoder.compile_steps(config.train.compile)
    optimizer = make_adam(list(model.parameters()), config.train.learning_rate)
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(
        optimizer, mode="max", factor=config.train.lr_factor, patience=config.train.lr_patience, min_lr=config.train.min_lr
    )
    return model, optimizer, scheduler


def checkpoint_payload(model, optimizer, scheduler, progress: Progress, config: Config, src_tok, tgt_tok) -> dict:
    return {
        "hardware": hardware_description(next(model.parameters()).device),
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "progress": asdict(progress),
        "rng": rng_state(),
        "config": config.to_dict(),
        "spm_sha256": {"src": src_tok.sha256, "tgt": tgt_tok.sha256},
    }


def metrics_path(run_dir: str | Path) -> Path:
    """<run_dir>/metrics.jsonl: one JSON record per validation."""
    return Path(run_dir) / "metrics.jsonl"


def read_metrics(path: Path) -> list[dict]:
    """The records of a metrics.jsonl file (none if it does not exist yet)."""
    return [json.loads(line) for line in read_lines(path) if line.strip()] if path.is_file() else []


def _trim_metrics(path: Path, last_epoch: int) -> None:
    """On resume, drop metric lines of epochs the checkpoint does not include."""
    if path.is_file():
        write_lines_atomic(path, (json.dumps(r) for r in read_metrics(path) if r["epoch"] <= last_epoch))


def run_training(
    config: Config, device: torch.device, resume: bool = False, show_bar: bool = True, ddp: Distributed = Distributed()
) -> Progress:
    """Train until ``train.epochs`` or early stopping; keep ``last`` and ``best`` checkpoints.

    Under ``ddp`` (torchrun) every process trains; only rank 0 logs, validates and writes.
    """
    run_dir = Path(config.run_dir)
    log = RunLog(run_dir / "train.log", echo=True, enabled=ddp.is_main)
    metrics_file = metrics_path(run_dir)
    cfg = config.train
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    seed_everything(cfg.seed)
    src_tok, tgt_tok = load_tokenizers(config)
    data = load_train_data(config, src_tok, tgt_tok)
    model, optimizer, scheduler = build_training(config, src_tok, tgt_tok, device)
    progress = Progress()

    last_path = checkpoint_path(config, "last")
    if resume and last_path.is_file():
        payload = load_checkpoint(last_path)
        check_compatible(payload, config, {"src": src_tok.sha256, "tgt": tgt_tok.sha256}, last_path)
        model.load_state_dict(payload["model"])
        optimizer.load_state_dict(payload["optimizer"])
        scheduler.load_state_dict(payload["scheduler"])
        progress = Progress(**payload["progress"])
        set_rng_state(payload["rng"])
        if ddp.is_main:
            _trim_metrics(metrics_file, progress.epoch)
        log(f"Resuming from {last_path}: {progress.epoch} epoch(s), {progress.step} steps done.")
    elif resume:
        log(f"No checkpoint at {last_path}: starting a new run.")
    elif last_path.is_file():
        raise NmtError(
            f"{run_dir} already holds a training run ({last_path}). Pass --resume to continue it, "
            f"or choose another run_dir (--set run_dir=...)."
        )
    if ddp.is_main:
        if not (resume and last_path.is_file()):
            metrics_file.unlink(missing_ok=True)
        save_config(config, run_dir / "config.yaml")
    ddp.barrier()  # every process has read the checkpoint before rank 0 writes new ones

    log(
        f"Model: {count_parameters(model):,} parameters; {len(data.train):,} training pairs "
        f"({data.skipped_long} longer than {cfg.max_len} subwords skipped); device {device}."
    )
    first_batches = epoch_batches(data.train, cfg, 1, ddp.world)
    log(
        f"{len(first_batches)} batches per epoch; padding is {100 * padding_fraction(first_batches, batch_lengths(data.train)):.1f}% "
        "of batch positions."
    )
    if ddp.enabled:
        log(
            f"Data parallel over {ddp.world} processes: effective batch {ddp.world} x {cfg.batch_size} = "
            f"{ddp.world * cfg.batch_size} sentences" + (f", {ddp.world * cfg.batch_tokens} tokens" if cfg.batch_tokens else "") + "."
        )
    translator = Translator(model, src_tok, tgt_tok, config.decode, device)
    trained = _wrap_data_parallel(model, ddp, device)

    def save(best: bool = False) -> None:
        if not ddp.is_main:
            return
        payload = checkpoint_payload(model, optimizer, scheduler, progress, config, src_tok, tgt_tok)
        save_training_checkpoint(Path(config.run_dir) / "checkpoints", payload, progress.step, cfg.keep_checkpoints, best)

    monitor = None
    if cfg.tensorboard and ddp.is_main:
        from nmt.train.monitor import TensorBoardMonitor

        monitor = TensorBoardMonitor(run_dir / "tensorboard", translator, data)
    with StopFlag().installed() as stop, contextlib.closing(monitor) if monitor else contextlib.nullcontext():
        run = EpochRunner(config, data, translator, trained, optimizer, scheduler, progress, save, stop, log,
                          show_bar and ddp.is_main, monitor, ddp)  # fmt: skip
        while progress.epoch < cfg.epochs and not progress.stopped_early:
            run.epoch()
            if ddp.any(bool(stop), device):  # arrived during validation: the epoch's checkpoint is written
                raise TrainingInterrupted(f"Training stopped by {stop.signal_name} after epoch {progress.epoch}.")
    if progress.nonfinite_steps:
        log(f"{progress.nonfinite_steps} update(s) were skipped for a non-finite loss or gradient.")
    reason = f"no dev BLEU gain in {cfg.patience} epochs" if progress.stopped_early else f"{progress.epoch} epochs"
    best_at = [r["train_seconds"] for r in read_metrics(metrics_file) if r["epoch"] == progress.best_epoch]
    to_best = f" (after {best_at[0]:.0f}s of training)" if best_at else ""
    log(
        f"Training done ({reason}): best dev BLEU {progress.best_bleu:.2f} at epoch {progress.best_epoch}{to_best}; "
        f"{progress.train_seconds:.0f}s of training. Checkpoints in {last_path.parent}."
    )
    return progress


def _wrap_data_parallel(model: Seq2Seq, ddp: Distributed, device: torch.device) -> torch.nn.Module:
    """The module the training step calls: ``model`` itself, or DDP around it under torchrun."""
    if not ddp.enabled:
        return model
    from torch.nn.parallel import DistributedDataParallel

    return DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)


@dataclass
class EpochRunner:
    """Everything an epoch of the run loop touches, so that one epoch is one call."""

    config: Config
    data: TrainData
    translator: Translator  # wraps the model itself, for validation
    trained: torch.nn.Module  # the module the step calls: the model, or DDP around it
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.ReduceLROnPlateau
    progress: Progress
    save: Callable[..., None]
    stop: StopFlag
    log: RunLog
    show_bar: bool
    monitor: Any = None  # TensorBoardMonitor, when train.tensorboard is on
    ddp: Distributed = field(default_factory=Distributed)

    def epoch(self) -> None:
        """Train one epoch, validate, step the LR schedule, checkpoint, append to metrics.jsonl."""
        config, data, progress, optimizer, ddp = self.config, self.data, self.progress, self.optimizer, self.ddp
        cfg, device = config.train, self.translator.device
        epoch = progress.epoch + 1
        stats = train_epoch(self.trained, data.train, optimizer, cfg, epoch, device, progress, self.save, self.stop,
                            self.show_bar, ddp)  # fmt: skip
        progress.train_seconds += stats.seconds
        metrics = ddp.broadcast(validate(self.translator, data, cfg) if ddp.is_main else None)
        self.scheduler.step(metrics["dev_bleu"])
        improved = metrics["dev_bleu"] > progress.best_bleu
        progress.epoch = epoch
        if improved:
            progress.best_bleu, progress.best_epoch, progress.bad_epochs = metrics["dev_bleu"], epoch, 0
        else:
            progress.bad_epochs += 1
            progress.stopped_early = progress.bad_epochs >= cfg.patience
        self.save(best=improved)
        record = {
            "epoch": epoch,
            "step": progress.step,
            "train_loss": round(stats.loss, 4),
            **{k: round(v, 4) for k, v in metrics.items()},
            "lr": optimizer.param_groups[0]["lr"],
            "tokens_per_s": round(stats.tokens_per_second, 1),
            "grad_norm": round(stats.grad_norm, 4),
            "epoch_seconds": round(stats.seconds, 2),
            "train_seconds": round(progress.train_seconds, 2),
        }
        if not ddp.is_main:
            return
        with open(metrics_path(config.run_dir), "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")
        if self.monitor is not None:
            self.monitor.log(record)
        self.log(
            f"epoch {epoch:3d}  train loss {stats.loss:.3f}  dev loss {metrics['dev_loss']:.3f}  "
            f"ppl {metrics['dev_ppl']:.1f}  BLEU {metrics['dev_bleu']:.2f}  chrF {metrics['dev_chrf']:.2f}  "
            f"{stats.tokens_per_second:.0f} tok/s  {stats.seconds:.0f}s" + ("  *best*" if improved else "")
        )
