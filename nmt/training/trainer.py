"""The ``Trainer``: built once from a config, then ``run()`` reads top to bottom::

    start (or resume from 'last')
    until the run control says it has ended (epochs, a callback's stop, the time budget):
        train an epoch's batches -- each at the learning rate of its position (schedule.py);
                                    a checkpoint every train.checkpoint_every steps, a
                                    validation every train.validate_every; a signal stops here
        validate                 -- dev loss, greedy BLEU/chrF through core search
        the record to the callbacks (metrics.jsonl, TensorBoard, probes, early stopping, yours),
        checkpoint 'last' (and 'best')

Under torchrun every process trains its share of each batch and validates its share of the
dev set; every rank gets the gathered scores, so every rank decides alike; only rank 0 logs
and writes. A stop signal (SIGINT, SIGTERM, SIGHUP) is answered with a checkpoint within a
step or a validation chunk: torchrun kills its workers 30 s after its own SIGTERM.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import torch

from nmt.config.files import save_config
from nmt.config.paths import run_paths
from nmt.config.schema import Config, TrainConfig
from nmt.core.device import ProcessSettings, make_deterministic, select_precision, skip_cudnn_attention
from nmt.core.errors import NmtError
from nmt.core.fileio import remove_temporaries
from nmt.core.hardware import hardware_description
from nmt.core.plugins import load_config_plugins
from nmt.core.progress import progress_bar
from nmt.core.threads import Decision, FixedThreads, OtherLoad, ThreadTuner, describe, make_tuner, usable_cores
from nmt.data.batching import Batch, padded_to_bucket, padding_fraction
from nmt.data.tokenizer import Tokenizer
from nmt.model.base import TranslationModel, count_parameters
from nmt.model.fast import graph_bucket
from nmt.runtime.checkpoint import save_training_checkpoint, training_checkpoint
from nmt.runtime.loading import check_trainable, load_checked_checkpoint, load_tokenizers, new_model, spm_hashes
from nmt.runtime.parent import check_architecture, freeze, inherit_weights, load_parent
from nmt.training.align_probe import AlignmentProbe, check_aligner
from nmt.training.callbacks import Callback, standard_callbacks
from nmt.training.control import RunControl
from nmt.training.data import (
    EpochLoader,
    TrainData,
    batch_lengths,
    epoch_batches,
    epoch_examples,
    load_train_data,
)
from nmt.training.distributed import Distributed
from nmt.training.meter import EpochMeter, EpochStats, duration
from nmt.training.metrics import MetricsFile, RunLog, RunSummary, ValidationRecord
from nmt.training.optim import EmaWeights, build_optimizer
from nmt.training.schedule import learning_rate, step_settings
from nmt.training.state import (
    Progress,
    TrainingInterrupted,
    rank_seed,
    rng_state,
    seed_everything,
    set_rng_state,
)
from nmt.training.step import StepResult, train_step, word_dropout
from nmt.training.timeline import Timeline, probe_sources, probe_translations
from nmt.training.validate import ValidationStopped, validate, validation_seconds

PACE_BATCHES = 20  # an epoch's length is estimated after this many batches


def build_trainer(
    config: Config,
    device: torch.device,
    ddp: Distributed | None = None,
    show_bar: bool = True,
    callbacks: Sequence[Callback] = (),
    echo: bool = True,
    log_prefix: str = "",
    thread_cap: int | None = None,
) -> Trainer:
    """The ``Trainer`` of ``config``: its plugins, tokenizers, prepared data and a new model, made
    in the order that makes a run reproducible (threads and determinism first, then the seed the
    model's initial weights come from). Under torchrun each rank then draws its own random
    numbers. What it sets process-wide is put back when the run ends. ``callbacks`` are told of
    the run after its own (nmt/training/callbacks.py); ``echo`` False keeps the log off the console,
    ``log_prefix`` marks its console lines (a member's). ``thread_cap``: at most this many CPU
    threads for ``train.threads: auto`` (a member's or a trial's share of the machine)."""
    ddp = ddp or Distributed()
    load_config_plugins(config.plugins, "Config key 'plugins'")  # a member or a trial is a process of its own
    check_aligner(config)  # a probe trained a whole epoch before eflomal was found missing
    before = ProcessSettings.current()
    thread_notes: list[str] = []
    tuner = make_tuner(config.train.threads, device, thread_cap or ddp_share(ddp), say=thread_notes.append)
    if config.train.deterministic:
        make_deterministic(device)  # before the model reaches the GPU: cuBLAS reads its workspace setting then
    skip_cudnn_attention(device)
    seed_everything(config.train.seed)  # before the model: its initial weights come from this seed
    src_tok, tgt_tok = load_tokenizers(config)
    check_trainable(config, src_tok, tgt_tok, device)  # its size against free memory, before it exists
    data = load_train_data(config, src_tok, tgt_tok)
    model = new_model(config, src_tok, tgt_tok)
    parent, notes = None, thread_notes
    if config.init_from and not run_paths(config).checkpoint("last").is_file():  # a run resumed has its own weights
        parent = load_parent(config.init_from)
        check_architecture(parent, config)
        inherited = inherit_weights(model, parent, (src_tok, tgt_tok))  # before the Trainer: its average starts here
        notes.append(
            f"Started from the parent {parent.path} ({parent.lineage['pair']}, sha256 {parent.sha256[:12]}…): "
            f"every tensor of the parent copied; {inherited}. "
            "Optimizer, schedule, step count and best score start fresh."
        )
    if config.train.guided_alignment:
        notes.append(
            f"Guided alignment (train.guided_alignment {config.train.guided_alignment:g}): the attention that "
            f"aligns (of a model with heads, the first head of its aligning layer) is pulled toward eflomal's links, "
            f"which {data.guided:,} of {len(data.train):,} training pairs have "
            f"({config.data.links or run_paths(config).training_alignments.name})."
        )
    frozen = freeze(model, config.train.freeze)
    if frozen:
        notes.append(f"Frozen (train.freeze: {', '.join(config.train.freeze)}): {frozen:,} parameters.")
    if ddp.rank:  # the same initial weights everywhere, not the same dropout: rank 0 draws on as one process does
        seed_everything(rank_seed(config.train.seed, ddp.rank))
    output = RunOutput(show_bar, echo, log_prefix)
    lineage = parent.lineage if parent is not None else None
    return Trainer(
        config, model, data, (src_tok, tgt_tok), device, ddp, output, callbacks, lineage, notes, before, tuner
    )


def ddp_share(ddp: Distributed) -> int | None:
    """Under torchrun, each process's share of this machine's cores (None: one process, all of them)."""
    if not ddp.enabled:
        return None
    return max(1, usable_cores() // max(1, int(os.environ.get("LOCAL_WORLD_SIZE", ddp.world))))


@dataclass(frozen=True)
class RunOutput:
    """What a run shows on the console (its files are written either way)."""

    show_bar: bool = True  # progress bars (rank 0)
    echo: bool = True  # the log's lines
    log_prefix: str = ""  # before each console line: whose it is when several runs share one (train.members)


class Trainer:
    """Trains ``model`` on ``data`` as ``config`` says; everything it holds comes through here
    (``build_trainer`` makes the model, data and the rest from the config; tests hand in their
    own). ``tokenizers``: (source, target), for validation's text and the checkpoints'
    vocabulary hashes; ``parent``: the lineage of the model it starts from (init_from);
    ``notes``: what was done before it, logged with the setup; ``settings_before``: the process
    settings to put back when ``run()`` ends; ``threads``: the tuner that chooses each step's CPU
    threads (``train.threads: auto``; None: the count stays as it is)."""

    def __init__(
        self,
        config: Config,
        model: TranslationModel,
        data: TrainData,
        tokenizers: tuple[Tokenizer, Tokenizer],
        device: torch.device,
        ddp: Distributed | None = None,
        output: RunOutput = RunOutput(),
        callbacks: Sequence[Callback] = (),
        parent: dict | None = None,
        notes: Sequence[str] = (),
        settings_before: ProcessSettings | None = None,
        threads: ThreadTuner | FixedThreads | None = None,
    ):
        ddp = ddp or Distributed()  # one process unless torchrun started several
        self.config, self.device, self.ddp = config, device, ddp
        self.run_dir = run_paths(config)
        self.log = RunLog(self.run_dir.train_log, output.echo, ddp.is_main, output.log_prefix)
        self.metrics = MetricsFile(self.run_dir.metrics)
        self.timeline = Timeline(self.run_dir.timeline)
        # train.probe_alignment: the attention's agreement with eflomal at each validation
        self.align_probe = AlignmentProbe(config, tokenizers) if config.train.probe_alignment else None
        self.show_bar = output.show_bar and ddp.is_main
        self.src_tok, self.tgt_tok = tokenizers
        self.data = data
        self.model = model.to(device)
        if self.config.train.compile != "none":
            self.model.compile_steps(self.config.train.compile)
        # CUDA graphs replay one shape each: batches padded to buckets (nmt/model/fast.py)
        graphed = self.config.train.compile == "reduce-overhead" and device.type == "cuda"
        self.graph_bucket = graph_bucket(type(model).whole_target) if graphed else None
        self.optimizer = build_optimizer(self.model, self.config.train)
        self.ema = EmaWeights(self.model, self.config.train.ema_decay) if self.config.train.ema_decay else None
        self.ema_is_better = False  # at the last validation
        self.progress = Progress()
        self.precision = select_precision(self.config.train.precision, device)
        self.scaler = torch.amp.GradScaler(device.type) if self.precision.loss_scaling else None
        self.control = RunControl(self.config.train, ddp, device)  # whether the run goes on, and why it ended
        self.epoch_length = 1  # batches in the epoch being trained (the budget schedule reads it)
        self.step_model: torch.nn.Module = self.model  # what the step calls; run() wraps it in DDP under torchrun
        self.pace_logged = False  # the epoch-length estimate is logged once per session
        self.loader = EpochLoader(data, ddp, self.config.train, device)  # kept across epochs (its workers too)
        self.settings_before = settings_before
        self.parent = parent
        self.notes = list(notes)
        # told of the run (rank 0), in order; any may end it at a validation (nmt/training/callbacks.py)
        self.callbacks: list[Callback] = standard_callbacks(self) + list(callbacks)
        self.seen_steps: set[int] = set()  # validations the callbacks saw before this resume (restore)
        self.threads = threads or FixedThreads()  # a count not measured: the same calls, doing nothing
        self.threads.on_decision = self.log_threads
        self.pace_load: OtherLoad | None = None  # other processes' load over the first batches (log_pace)

    def run(self, resume: bool = False) -> Progress:
        """Train until the run control says the run has ended; keep ``last`` and ``best`` checkpoints."""
        reason = "failed before it started"
        try:
            resumed = self.start(resume)
            steps_before = self.progress.step  # a resume that trains nothing says so, not "Training done"
            self.tell("on_start", resumed)
            self.control.start(self.progress)
            self.step_model = self.ddp.wrap(self.model, self.device)
            signal = self.control.signal
            with signal.installed():
                if self.parent is not None and self.progress.step == 0:
                    self.validate_parent()
                while (ended := self.control.ended(self.progress)) is None:
                    self.run_epoch()
                    if self.ddp.any(bool(signal), self.device):  # arrived while recording: the checkpoint is written
                        raise TrainingInterrupted(
                            f"Training stopped by {signal.signal_name} after epoch {self.progress.epoch}."
                        )
            reason = ended
            if resumed and self.progress.step == steps_before:
                self.log(f"Nothing to train: the run had already ended ({ended}). Its checkpoints are as they were.")
            else:
                self.log_summary(ended)
            return self.progress
        except TrainingInterrupted as error:
            reason = f"interrupted: {error}"
            raise
        except BaseException as error:
            reason = f"failed: {type(error).__name__}: {error}"
            raise
        finally:
            self.tell("on_end", reason)
            self.loader.close()
            if self.settings_before is not None:
                self.settings_before.restore()

    def tell(self, hook: str, *arguments) -> None:
        """Call ``hook`` of every callback, in order (rank 0: the callbacks' process)."""
        if self.ddp.is_main:
            for callback in self.callbacks:
                getattr(callback, hook)(self, *arguments)

    def start(self, resume: bool) -> bool:
        """Resume from ``last`` (True), or start a new run (refusing to overwrite an old one)."""
        last = self.run_dir.checkpoint("last")
        resuming = resume and last.is_file()
        if resuming:
            self.restore()
        elif resume:
            self.log(f"No checkpoint at {last}: starting a new run.")
        elif last.is_file():
            raise NmtError(
                f"{self.run_dir.root} already holds a training run ({last}). Pass --resume to continue it, "
                f"or choose another run_dir (--set run_dir=...)."
            )
        if self.ddp.is_main:
            self.run_dir.writable()  # no folder of the run is a link elsewhere
            if not resuming:
                self.metrics.reset()
                self.timeline.reset()
            remove_temporaries(self.run_dir.checkpoints)  # a checkpoint whose writing was killed
            save_config(self.config, self.run_dir.config)
        self.ddp.barrier()  # every process has read the checkpoint before rank 0 writes new ones
        self.log_setup()
        return resuming

    def restore(self) -> None:
        payload = load_checked_checkpoint(self.config, "last", self.src_tok, self.tgt_tok)
        self.model.load_state_dict(payload["model"])
        self.optimizer.load_state_dict(payload["optimizer"])
        self.progress = Progress.from_dict(payload["progress"])
        if "lr_reductions" not in payload["progress"] and "scheduler" in payload:  # saved with ReduceLROnPlateau
            self.progress.lr_reductions, self.progress.lr_stalled = plateau_position(
                payload["scheduler"], self.config.train
            )
        if self.ema is not None and "ema" in payload:
            self.ema.load_state_dict(payload["ema"])
            self.ema_is_better = payload.get("translate_with") == "ema"
        if self.ema is not None and "ema" not in payload:
            self.ema.reset()  # from the weights just loaded, not the ones it was built with
        if self.scaler is not None and "scaler" in payload:
            self.scaler.load_state_dict(payload["scaler"])
        if payload.get("threads") is not None:
            self.threads.load_state_dict(payload["threads"])
        self.parent = payload.get("parent")
        set_rng_state(payload["rng"], self.device, self.config.train.seed, self.ddp.rank, self.progress.step)
        if self.ddp.is_main:  # validations after the checkpoint are redone: each callback sees a record once
            self.seen_steps = {r["step"] for r in self.metrics.read() if not MetricsFile.included(r, self.progress)}
            self.metrics.trim(self.progress)
            self.timeline.trim(self.progress)
        self.log(
            f"Resuming from {self.run_dir.checkpoint('last')}: {self.progress.epoch} epoch(s), "
            f"{self.progress.step} steps done."
        )

    def run_epoch(self) -> None:
        """Train one epoch and validate it (each validation checkpoints and tells the callbacks)."""
        epoch = self.progress.epoch + 1
        stats = self.train_epoch(epoch)
        if self.progress.stop_reason:  # a validation inside the epoch ended the run, and was checkpointed
            return
        self.validation(epoch, stats, "partial" if self.control.out_of_time else "epoch")

    def validation(self, epoch: int, stats: EpochStats, kind: str) -> None:
        """Validate, record, tell the callbacks, checkpoint. ``kind``: "epoch" (its end),
        "mid_epoch" (train.validate_every) or "partial" (the budget ended the epoch early: the
        checkpoint resumes where it stopped)."""
        try:
            metrics = self.validate()
        except ValidationStopped:  # the training so far is in the checkpoint: --resume validates it first
            self.save()
            raise TrainingInterrupted(
                f"Training stopped by {self.control.signal.signal_name or 'a signal'} while validating epoch {epoch}."
            ) from None
        reductions = self.progress.lr_reductions
        improved = self.progress.note_validation(
            epoch, metrics["dev_bleu"], self.config.train, counts=kind != "partial", dev_loss=metrics["dev_loss"]
        )
        if kind == "epoch":
            self.progress.finish_epoch(epoch, stats.seconds)
        if self.progress.lr_reductions != reductions:  # the plateau schedule lowers the rate from now on
            self.set_learning_rate(
                learning_rate(self.config.train, self.control.position(self.progress, epoch + 1, 1, 1))
            )
        reasons = []
        if self.ddp.is_main:  # rank 0 holds the record: its callbacks decide, every rank follows
            reasons = self.tell_validation(self.record(epoch, stats, metrics, improved, kind))
        if self.ddp.any(bool(reasons), self.device):
            self.progress.stop_reason = reasons[0] if reasons else "a callback on rank 0"
        self.save(best=improved)

    def tell_validation(self, record: ValidationRecord) -> list[str]:
        """The callbacks' reasons to stop, each told of ``record`` once: a validation redone after
        a resume goes only to those that trimmed their records (``rewrites_on_resume``)."""
        seen = record.step in self.seen_steps
        told = [c for c in self.callbacks if c.rewrites_on_resume or not seen]
        return [reason for callback in told if (reason := callback.after_validation(self, record))]

    def validate_parent(self) -> None:
        """The parent's weights as they are, on this dev set: the timeline's epoch 0 (the lab then
        shows the parent's alignments turning into the child's)."""
        try:
            metrics = self.validate()
        except ValidationStopped:
            raise TrainingInterrupted(
                f"Training stopped by {self.control.signal.signal_name} before it began."
            ) from None
        bleu, chrf = metrics["dev_bleu"], metrics["dev_chrf"]
        self.log(f"The parent as it is, on this dev set: BLEU {bleu:.2f}, chrF {chrf:.2f}.")
        self.record_probes(0, metrics["dev_bleu"])

    def train_epoch(self, epoch: int) -> EpochStats:
        """One pass over the training data in bucketed, seeded-shuffled batches, starting at
        ``progress.batch_in_epoch`` (after a mid-epoch checkpoint). It ends at its last batch,
        when the budget is spent, or when a validation inside it ends the run; a stop signal
        checkpoints and raises ``TrainingInterrupted``."""
        progress = self.progress
        self.step_model.train()
        examples = epoch_examples(
            self.data, self.src_tok, self.tgt_tok, self.config.train, epoch, self.own_pair_only(epoch)
        )
        batches = self.epoch_plan(examples, epoch)
        self.epoch_length = len(batches)
        meter = EpochMeter(progress, self.device)
        bar = progress_bar(len(batches), f"epoch {epoch}", "batch", self.show_bar, initial=progress.batch_in_epoch)
        first = progress.batch_in_epoch + 1
        started = time.perf_counter()
        if not self.pace_logged:
            self.pace_load = OtherLoad()
        for number, batch in enumerate(self.loader.batches(examples, batches[first - 1 :]), start=first):
            tokens = batch.num_tgt_tokens  # counting them syncs a GPU: once per step
            with self.threads.unit(tokens):
                result = self.train_batch(batch, tokens, epoch, number, len(batches[number - 1]))
            meter.add(result, tokens)
            progress.step += 1
            progress.batch_in_epoch = number
            bar.update(1)
            if number - first + 1 == PACE_BATCHES and not self.pace_logged:
                self.log_pace(len(batches), (time.perf_counter() - started) / PACE_BATCHES)
            if number % 20 == 0 or number == len(batches):  # reading the loss syncs: not every step
                bar.set_postfix(**meter.postfix())
            if not self.epoch_goes_on(epoch, number, len(batches), meter):
                break
        bar.close()
        return meter.stats(progress, self.ddp)

    def own_pair_only(self, epoch: int) -> bool:
        """train.related_until: whether ``epoch`` trains on this pair's pairs alone. Decided once,
        at the start of the first epoch past that share of the run, by every process together,
        and kept in the progress: a resumed run keeps the phase it was in."""
        progress, cfg = self.progress, self.config.train
        if self.data.own is None or cfg.related_until >= 1.0:
            return False
        if not progress.own_pair_since and not progress.batch_in_epoch:
            share = self.control.position(progress, epoch, 1, 1).share_spent(cfg)
            if self.ddp.any(share >= cfg.related_until, self.device):
                progress.own_pair_since = epoch
                self.log(
                    f"Epoch {epoch} on: this pair's {int(self.data.own.sum()):,} training pairs alone "
                    f"({share:.0%} of the run spent; train.related_until: {cfg.related_until:g})."
                )
        return bool(progress.own_pair_since) and epoch >= progress.own_pair_since

    def epoch_goes_on(self, epoch: int, number: int, batches: int, meter: EpochMeter) -> bool:
        """After batch ``number`` of ``batches``: check the figures, tell the step callbacks, act on
        the run control's verdict (checkpoint and raise on a stop signal; validate or checkpoint
        when due), and say whether the epoch goes on."""
        progress, train = self.progress, self.config.train
        check_every = 1 if self.device.type == "cpu" else 20  # reading counters syncs the GPU: not every step
        if number % check_every == 0:
            self.check_nonfinite(meter, epoch)
        self.tell_step(progress.step)
        verdict = self.control.after_step(number % check_every == 0 or number == batches)
        if verdict.stop_signal:
            meter.save_into(progress, self.ddp)
            self.save()
            raise TrainingInterrupted(
                f"Training stopped by {self.control.signal.signal_name or 'a signal'} at epoch {epoch}, "
                f"step {progress.step}."
            )
        if number == batches:
            return False
        if verdict.out_of_time:
            self.control.out_of_time = True
            return False
        if train.validate_every and progress.step % train.validate_every == 0:  # validates and checkpoints
            with meter.paused():  # tokens/s counts training only
                self.validation(epoch, meter.stats(progress, self.ddp), "mid_epoch")
            self.step_model.train()
            return not progress.stop_reason
        if (train.checkpoint_every and progress.step % train.checkpoint_every == 0) or verdict.checkpoint_due:
            meter.save_into(progress, self.ddp)
            self.save()
        return True

    def tell_step(self, step: int) -> None:
        """``after_step`` of the callbacks whose ``every_steps`` divides ``step`` (rank 0)."""
        if self.ddp.is_main:
            for callback in self.callbacks:
                if callback.every_steps and step % callback.every_steps == 0:
                    callback.after_step(self, step)

    def epoch_plan(self, examples, epoch: int) -> list[list[int]]:
        """This epoch's global batches for this number of processes. A mid-epoch checkpoint
        resumed under another number keeps what was trained: the examples its batches covered
        are left out, and the rest are batched for the processes there are now."""
        progress, world = self.progress, self.ddp.world
        if progress.batch_in_epoch and progress.epoch_world != world:
            progress.epoch_done.append([progress.epoch_world, progress.batch_in_epoch])
            progress.batch_in_epoch = 0
            self.log(f"Epoch {epoch} goes on over {world} process(es); the examples already trained are not repeated.")
        progress.epoch_world = world
        return epoch_batches(examples, self.config.train, epoch, world, done=progress.epoch_done)

    def train_batch(self, batch: Batch, tokens: int, epoch: int, number: int, sentences: int) -> StepResult:
        """One update, with the settings the schedules give this step; under DDP the loss is
        normalised by the global token count."""
        normalizer = self.ddp.global_tokens(tokens, self.device) / self.ddp.world  # DDP averages gradients over ranks
        settings = step_settings(
            self.config.train, self.control.position(self.progress, epoch, number, self.epoch_length)
        )
        self.set_learning_rate(settings.learning_rate)
        if self.graph_bucket is not None:
            batch = padded_to_bucket(batch, *self.graph_bucket)
            torch.compiler.cudagraph_mark_step_begin()  # a new iteration: the last step's graph outputs are dead
        batch = word_dropout(batch.to(self.device), settings.word_dropout)
        try:
            result = train_step(
                self.step_model,
                batch,
                self.optimizer,
                self.config.train,
                normalizer,
                self.precision,
                self.scaler,
                self.ddp.agree,
            )
        except torch.cuda.OutOfMemoryError:
            raise NmtError(
                f"CUDA ran out of memory at epoch {epoch}, batch {number} ({sentences} sentences, {tokens} target "
                f"tokens). Lower train.batch_size (now {self.config.train.batch_size}) or set train.batch_tokens (now "
                f"{self.config.train.batch_tokens or 'off'}) to cap padded tokens per batch, then resume with --resume."
            ) from None
        if self.ema is not None:
            self.ema.update()
        return result

    def set_learning_rate(self, rate: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = rate

    def check_nonfinite(self, meter: EpochMeter, epoch: int) -> None:
        if meter.in_a_row.item() >= self.config.train.max_nonfinite:
            raise NmtError(
                f"Training stopped at epoch {epoch}, step {self.progress.step}: "
                f"{int(meter.in_a_row.item())} steps in a row had a non-finite loss or gradient (skipped). "
                + (
                    "fp16's loss scale could not find a finite gradient: try train.precision: bf16 or float32. "
                    if self.scaler is not None
                    else ""
                )
                + "Lower train.learning_rate or check the data; --resume continues from the last checkpoint."
            )

    def validate(self) -> dict[str, float]:
        """The dev scores of the weights, or of their average when it does better (every rank
        validates its share; ``ValidationStopped`` when a stop signal arrives meanwhile)."""
        stop = self.control.signal.__bool__
        metrics = validate(self.model, self.data, self.config, self.tgt_tok, self.device, self.ddp, stop)
        if self.ema is None:
            return metrics
        with self.ema.swapped_in():
            averaged = validate(self.model, self.data, self.config, self.tgt_tok, self.device, self.ddp, stop)
        self.ema_is_better = averaged["dev_bleu"] > metrics["dev_bleu"]
        chosen = averaged if self.ema_is_better else metrics
        return {**chosen, "raw_dev_bleu": metrics["dev_bleu"], "ema_dev_bleu": averaged["dev_bleu"]}

    def save(self, best: bool = False) -> None:
        """Checkpoint everything resuming needs (rank 0 writes; every rank's random state goes in)."""
        rng = self.ddp.gather(rng_state(self.device))  # on every rank: a collective
        self.control.last_saved = self.control.clock()
        if not self.ddp.is_main:
            return
        self.progress.elapsed_seconds = self.control.budget.spent()
        payload = training_checkpoint(
            model=self.model.state_dict(),
            optimizer=self.optimizer.state_dict(),
            progress=asdict(self.progress),
            rng=rng if self.ddp.enabled else rng[0],  # type: ignore[arg-type,index]  # rank 0 holds every rank's
            config=self.config.to_dict(),
            spm_sha256=spm_hashes(self.src_tok, self.tgt_tok),
            hardware=hardware_description(self.device),
            scaler=self.scaler.state_dict() if self.scaler is not None else None,
            parent=self.parent,
            ema=self.ema.state_dict() if self.ema is not None else None,
            translate_with="ema" if self.ema_is_better else "model",
            threads=self.threads.state_dict(),
        )
        save_training_checkpoint(self.run_dir, payload, self.progress.step, self.config.train.keep_checkpoints, best)

    def record(
        self, epoch: int, stats: EpochStats, metrics: dict[str, float], improved: bool, kind: str
    ) -> ValidationRecord:
        """The validation's record, as the callbacks see it and metrics.jsonl keeps it."""
        inside = kind != "epoch"  # a validation inside the epoch: its share so far
        return ValidationRecord(
            epoch=epoch,
            step=self.progress.step,
            train_loss=round(stats.loss, 4),
            **{name: round(value, 4) for name, value in metrics.items()},
            lr=self.optimizer.param_groups[0]["lr"],
            tokens_per_s=round(stats.tokens_per_second, 1),
            grad_norm=round(stats.grad_norm, 4),
            epoch_seconds=round(stats.seconds, 2),
            train_seconds=round(self.progress.train_seconds + (stats.seconds if inside else 0), 2),
            elapsed_seconds=round(self.control.budget.spent(), 2),
            best=improved,
            threads=torch.get_num_threads() if self.device.type == "cpu" else None,
            kind=kind,
            epochs=round(epoch - 1 + self.progress.batch_in_epoch / max(1, self.epoch_length), 4) if inside else None,
        )

    def record_probes(self, epoch: int, dev_bleu: float) -> None:
        """The probe sentences' translation and attention into timeline.jsonl (rank 0), with
        the weights a checkpoint of this epoch translates with."""
        sources = probe_sources(self.data.dev_sources, self.config.train.probes)
        if not ((sources or self.align_probe) and self.ddp.is_main):
            return
        swap = self.ema.swapped_in() if self.ema is not None and self.ema_is_better else None
        with swap or contextlib.nullcontext():
            probes = probe_translations(self.model, sources, self.config, (self.src_tok, self.tgt_tok), self.device)
            aligned = self.align_probe.measure(self.model, self.device) if self.align_probe else None
        record = {"epoch": epoch, "step": self.progress.step, "dev_bleu": round(dev_bleu, 2), "probes": probes}
        if aligned is not None:
            record["alignment"] = aligned
            self.log(
                f"Attention against eflomal on {aligned['pairs']} dev pairs (train.probe_alignment): AER "
                f"{aligned['aer']:.3f}, precision {aligned['precision']:.3f}, recall {aligned['recall']:.3f}."
            )
        self.timeline.append(record)

    def log_setup(self) -> None:
        train, data, ddp = self.config.train, self.data, self.ddp
        self.log(
            f"Model: {count_parameters(self.model):,} parameters; {len(data.train):,} training pairs "
            f"({data.skipped_long} longer than {train.max_len} subwords skipped); device {self.device}, "
            f"{self.precision.describe(recurrent=type(self.model).recurrent)}"
            f"{', deterministic' if train.deterministic else ''}."
        )
        self.log_model_notes()
        for note in self.notes:
            self.log(note)
        first_batches = epoch_batches(data.train, train, 1, ddp.world)
        padding = padding_fraction(first_batches, batch_lengths(data.train))
        self.log(f"{len(first_batches)} batches per epoch; padding is {100 * padding:.1f}% of batch positions.")
        if ddp.is_main:
            self.log_validation_estimate()
        if ddp.enabled:
            tokens = f", {ddp.world * train.batch_tokens} tokens" if train.batch_tokens else ""
            self.log(
                f"Data parallel over {ddp.world} processes: effective batch {ddp.world} x {train.batch_size} = "
                f"{ddp.world * train.batch_size} sentences{tokens}."
            )

    def log_model_notes(self) -> None:
        """Keys of another model family this model does not read, and the model family's own notes."""
        model = self.config.model
        if model.unread:
            settings = ", ".join(f"model.{key}: {value}" for key, value in model.unread.items())
            self.log(f"Not read by model.arch {model.arch}: {settings} (another model family's settings).")
        for note in self.model.training_notes(self.config, self.device):
            self.log(note)

    def log_pace(self, batches: int, seconds_per_batch: float) -> None:
        """How long an epoch will take, at the pace of this session's first batches (and whether
        other processes were busy meanwhile: the pace is theirs to share)."""
        self.pace_logged = True
        other = self.pace_load.cores() if self.pace_load is not None and self.device.type == "cpu" else None
        busy = ""
        if other is not None and other >= 0.5:
            cores = usable_cores()
            busy = f" Other processes are using about {other:.1f} of this machine's {cores} cores: " + (
                "train.threads: auto keeps measuring which thread count is fastest beside them."
                if self.threads.measures
                else "the run shares the cores with them (train.threads: auto measures what is fastest)."
            )
        if batches >= 2 * PACE_BATCHES:  # a short epoch is over before an estimate helps
            self.log(
                f"An epoch ({batches:,} batches) takes about {duration(batches * seconds_per_batch)} "
                f"at the pace of the first {PACE_BATCHES} batches.{busy}"
            )
        elif busy:
            self.log(busy.strip())

    def log_threads(self, decision: Decision) -> None:
        """A thread measurement's result: the first, any that changes the count, and any the pace
        moving started (a periodic one that keeps the count is not worth a line)."""
        periodic = decision.why.endswith("since the last measurement")
        if not decision.previous or decision.threads != decision.previous or not periodic:
            self.log(describe(decision, "tok/s"))

    def log_validation_estimate(self) -> None:
        """How long each validation will take, and what that means for a time budget."""
        data, passes = self.data, 2 if self.ema is not None else 1  # EMA weights are validated too
        seconds = passes * validation_seconds(self.model, data, self.config, self.device)
        sample = " (a fixed sample: train.validation_sentences)" if self.config.train.validation_sentences else ""
        fresh = "" if self.progress.step else " (at the references' length: the untrained model's outputs run longer)"
        hint = ""
        if seconds > 60 and not self.config.train.validation_sentences:
            hint = " train.validation_sentences: N validates on a fixed sample of N instead."
        self.log(
            f"A validation ({len(data.dev_sources):,} dev sentences{sample}, loss on {len(data.dev):,} pairs, "
            f"greedy BLEU) takes up to about {duration(seconds)}{fresh}.{hint}"
        )
        if self.config.train.max_minutes:
            self.log(
                f"The {self.config.train.max_minutes:g}-minute budget counts training, validation and checkpoints; "
                f"when it runs out inside an epoch, one last validation (up to about {duration(seconds)}) follows."
            )

    def log_summary(self, reason: str) -> None:
        """The run's last line: why it ended, its best validation and its time (``RunSummary``:
        the figures nmt plot and the model card give too)."""
        progress = self.progress
        if progress.nonfinite_steps:
            self.log(f"{progress.nonfinite_steps} update(s) were skipped for a non-finite loss or gradient.")
        summary = RunSummary.of(self.metrics.read())
        told = f"{summary.best_line()}; {summary.trained_line()}" if summary else "no validation"
        self.log(f"Training done ({reason}): {told}. Checkpoints in {self.run_dir.checkpoints}.")


def plateau_position(scheduler_state: dict, cfg: TrainConfig) -> tuple[int, int]:
    """(reductions, stalled validations) of a checkpoint saved while torch's ReduceLROnPlateau
    drove the plateau schedule (before the learning rate became ``schedule.learning_rate``)."""
    last = scheduler_state.get("_last_lr", [cfg.learning_rate])[0]
    reductions = 0
    while reductions < 1000 and max(cfg.min_lr, cfg.learning_rate * cfg.lr_factor**reductions) > last * (1 + 1e-6):
        reductions += 1
    return reductions, int(scheduler_state.get("num_bad_epochs", 0))
