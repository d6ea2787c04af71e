"""The ``nmt`` command: prepare | train | translate | evaluate, each over one YAML config.

Each command parses its options, loads the config, calls one function and prints. A user
mistake (``NmtError``, a missing file, an unwritable directory) ends with a short message
and exit code 1, never a traceback.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import secrets
import sys
from pathlib import Path
from typing import Annotated

import typer
import yaml

from nmt.config.files import load_config, save_config
from nmt.config.schema import Config
from nmt.core.errors import NmtError
from nmt.core.fileio import disk_full

app = typer.Typer(
    add_completion=False,
    pretty_exceptions_enable=False,
    no_args_is_help=True,
    help="Attention-based translation (RNN encoder-decoders and the Transformer) for small parallel corpora "
    "(Anki/Tatoeba sentence pairs). Every command reads one YAML config.",
)

ConfigOption = Annotated[Path, typer.Option("--config", "-c", help="YAML config file (see configs/).")]
SetOption = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        "-s",
        help="Override a config value: dotted KEY=VALUE, VALUE read as YAML (e.g. --set train.batch_size=32). "
        "Repeatable.",
    ),
]
CheckpointOption = Annotated[
    str, typer.Option("--checkpoint", help="'best', 'last' (in <run_dir>/checkpoints/) or a checkpoint file path.")
]
CheckpointsOption = Annotated[
    list[str] | None,
    typer.Option(
        "--checkpoint",
        help="'best' (default), 'last' or a checkpoint file path; repeat to decode with an ensemble "
        "(averaged log-probabilities).",
    ),
]
DeviceOption = Annotated[
    str | None, typer.Option("--device", help="auto, cpu or cuda (default: the config's train.device).")
]
OptionalConfigOption = Annotated[
    Path | None, typer.Option("--config", "-c", help="YAML config file (see configs/); or use --model.")
]
ModelOption = Annotated[
    list[Path] | None,
    typer.Option(
        "--model",
        help="A model package folder from `nmt export`: no config, checkpoint or prepared data needed. "
        "Repeat for an ensemble.",
    ),
]
InitFromOption = Annotated[
    str | None,
    typer.Option(
        "--init-from",
        help="Start from a model you have (init_from): a run directory (its best checkpoint) or a package "
        "from `nmt export`; continued training, fine-tuning or transfer to a related pair. The same on prepare "
        "(which takes the parent's tokenizers where they fit) and train.",
    ),
]
MinutesOption = Annotated[
    float | None,
    typer.Option(
        "--minutes",
        min=0,
        help="Wall-clock budget for the whole run, resumes included (train.max_minutes): at the budget "
        "training validates, keeps the best, checkpoints and stops; --resume with a larger value goes on.",
    ),
]
EngineOption = Annotated[
    str,
    typer.Option(
        "--engine",
        help="What runs --model packages: torch, onnx (the ONNX graphs `nmt export --onnx` makes, on onnxruntime), "
        "ctranslate2 (the CTranslate2 model `nmt export --ctranslate2` makes), or a plugin's engine.",
    ),
]
ThreadsOption = Annotated[
    str,
    typer.Option(
        "--threads",
        help="CPU threads: auto (measured while it decodes, and kept right when another program gets busy) "
        "or a number (0: PyTorch's default).",
    ),
]
PlotAttentionOption = Annotated[
    Path | None,
    typer.Option(
        "--plot-attention",
        help="Attention heatmaps: a folder (one file per sentence, the first --plot-count, in --plot-format), "
        "or with --text a file ending in .png, .svg or .pdf.",
    ),
]
NBestOption = Annotated[
    int | None,
    typer.Option(
        "--n-best",
        min=1,
        help="Write the K best translations of each line, best first, as TSV: line number, score, text.",
    ),
]
TgtLangOption = Annotated[
    str | None,
    typer.Option(
        "--tgt-lang",
        help="Which target a model of several targets (data.related) translates into (default: data.tgt_lang).",
    ),
]
BeamOption = Annotated[
    int | None, typer.Option("--beam-size", min=1, help="Beam width; 1 = greedy (default: decode.beam_size).")
]


def user_errors(func):
    """Turn user mistakes into one-paragraph messages and exit code 1."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except NmtError as exc:
            typer.echo(f"Error: {exc}", err=True)
        except BrokenPipeError:
            # The reader stopped early (`nmt translate ... | head -3`): that is its right, not a mistake.
            # Quiet, and with the status a shell gives a command SIGPIPE ended; stdout goes to
            # /dev/null so that Python's flush at exit does not complain about the same pipe.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise typer.Exit(128 + 13) from None
        except (PermissionError, FileNotFoundError, IsADirectoryError, NotADirectoryError) as exc:
            typer.echo(f"Error: {exc.strerror}: {exc.filename}", err=True)
        except OSError as exc:
            if exc.errno is None:
                raise
            if disk_full(exc) is not None:
                where = f" while writing {exc.filename}" if exc.filename else ""
                typer.echo(
                    f"Error: the disk is full ({exc.strerror}){where}. Free some space and run the command again: "
                    "every file is written whole or not at all, so what was there before is intact.",
                    err=True,
                )
            else:
                typer.echo(f"Error: {exc.strerror} ({exc.filename or 'while writing output'}).", err=True)
        except KeyboardInterrupt:
            typer.echo("Interrupted.", err=True)
            raise typer.Exit(130) from None
        raise typer.Exit(1)

    return wrapper


@app.callback()
@user_errors
def load_plugins_first(
    plugin: Annotated[
        list[str] | None,
        typer.Option(
            "--plugin",
            help="A module to import first (repeat for several): your attentions, cells, engines or callbacks "
            "register themselves; the run's config keeps it (plugins:). Give it before the command.",
        ),
    ] = None,
) -> None:
    """Before any command: the plugins named with --plugin (nmt/core/plugins.py)."""
    from nmt.core.plugins import request_plugins

    request_plugins(plugin or [])


def _load(config: Path, overrides: list[str] | None) -> Config:
    return load_config(config, overrides or [])


@contextlib.contextmanager
def _writing(cfg: Config, command: str):
    """Hold the run's lock, and the prepared data's where it lies outside the run, while this
    command writes into them: a second command on the same run is refused (nmt/core/locking.py)."""
    from nmt.config.paths import refuse_linked_prepared_dir
    from nmt.core.locking import holding

    refuse_linked_prepared_dir(cfg)
    run = Path(cfg.run_dir)
    folders = [run]
    if not Path(cfg.prepared_dir).resolve().is_relative_to(run.resolve()):
        folders.append(Path(cfg.prepared_dir))
    with contextlib.ExitStack() as stack:
        for folder in folders:
            stack.enter_context(holding(folder, command))
        yield


def _device(config: Config, device: str | None):
    """--device, else train.device."""
    return _device_named(device or config.train.device)


def _device_named(name: str):
    """The device, set up as every command runs on it (TF32 on where it is a GPU)."""
    from nmt.core.device import prepare_device

    return prepare_device(name)


@app.command()
@user_errors
def prepare(
    config: ConfigOption,
    set_: SetOption = None,
    force: Annotated[bool, typer.Option("--force", help="Prepare again even if the outputs are up to date.")] = False,
    download: Annotated[
        str | None,
        typer.Option(
            "--download", help="Fetch the Anki archive <LANG>-eng.zip (e.g. mar, fra) from manythings.org first."
        ),
    ] = None,
    url: Annotated[
        str | None, typer.Option("--url", help="Address to fetch instead, '{lang}' replaced by --download's LANG.")
    ] = None,
    init_from: InitFromOption = None,
) -> None:
    """Read the data (a TSV file, or line-aligned files), clean it, split it by source sentence
    (or take the given dev/test sets), train SentencePiece models.

    Writes train/dev/test text files, multi-reference dev/test files, one SentencePiece model per
    language (or one joint model) and a report into data.prepared_dir (default <run_dir>/data).
    Malformed lines are reported with file and line number and skipped (data.on_malformed=skip) or
    refused (=error). Re-running with unchanged inputs and config reuses the outputs. data.path may
    also be an Anki zip archive (verified and unpacked); --download LANG fetches one into
    data/<LANG>-eng/. docs/tutorials/your-data.md shows every source kind.
    """
    from nmt.config.paths import run_paths
    from nmt.pipelines.prepare import changed_model_settings, refuse_over_checkpoints
    from nmt.pipelines.prepare import prepare as run_prepare

    cfg = _load(config, set_)
    cfg.init_from = init_from or cfg.init_from
    if download:
        from nmt.data.download import download_anki

        if cfg.data.train:
            raise NmtError("--download fetches a TSV for data.path, but this config trains on data.train's files.")
        cfg.data.path = str(download_anki(download, Path("data") / f"{download}-eng", url))
        typer.echo(f"Downloaded {cfg.data.path}", err=True)
    with _writing(cfg, f"nmt prepare --config {config}"):
        changed = changed_model_settings(cfg)
        if changed and not force:  # checked before anything is written
            refuse_over_checkpoints(cfg, f"this config changes its model settings ({'; '.join(changed)})")
        report = run_prepare(cfg, force=force, log=lambda msg: typer.echo(msg, err=True))
        if force or not run_paths(cfg).trained_checkpoints():  # a trained run's config.yaml describes its checkpoints
            save_config(cfg, run_paths(cfg).config)
    if report.reused:
        typer.echo(f"Prepared data in {cfg.prepared_dir} is up to date (reused; --force to redo).")
    typer.echo(report.summary())
    typer.echo(f"Wrote {cfg.prepared_dir}")


@app.command()
@user_errors
def init(
    data: Annotated[
        list[Path] | None,
        typer.Argument(help="A TSV file or an Anki zip, or two line-aligned files (source, target)."),
    ] = None,
    to: Annotated[
        Path | None,
        typer.Option(
            "--to",
            help="Where to write the config (default: configs/SRC-TGT.yaml where a configs folder is here, "
            "else ./SRC-TGT.yaml).",
        ),
    ] = None,
    minutes: Annotated[float, typer.Option("--minutes", min=0.1, help="The training budget it is written for.")] = 5.0,
    src_lang: Annotated[
        str, typer.Option("--src-lang", help="The source's language code (default: from the file names and scripts).")
    ] = "",
    tgt_lang: Annotated[
        str, typer.Option("--tgt-lang", help="The target's language code (default: from the file names and scripts).")
    ] = "",
    init_from: InitFromOption = None,
    arch: Annotated[
        str,
        typer.Option(
            "--arch",
            help="rnn or transformer: that family's measured recipe for the corpus, instead of the family measured "
            "ahead for its size and budget (write both to compare them on your data).",
        ),
    ] = "",
    example: Annotated[
        str | None,
        typer.Option(
            "--example",
            help="Copy an example that ships with nmt (eng-mar: 33,725 English-Marathi pairs and their configs; "
            "eng-hin: 2,549 English-Hindi pairs and the small-corpus recipes) "
            "into this folder instead.",
        ),
    ] = None,
) -> None:
    """Write a first config for your corpus: it counts pairs, sources and lengths, finds the scripts and the
    languages, and picks the recipe and the model family (RNN or Transformer) measured for a corpus of that size,
    that budget and this machine (with --init-from: the recipe that continues that model, beside its own corpus
    where its target shares your target's script).
    With --example NAME, copy an example corpus and its configs here instead."""
    if example is not None:
        if data:
            raise NmtError("Give a corpus of your own, or --example NAME, not both.")
        _copy_example(example)
        return
    if not data:
        raise NmtError("Give the corpus to write a config for (nmt init FILE), or --example NAME.")
    from nmt.pipelines.init import init_config

    warn = functools.partial(typer.echo, err=True)
    path, text = init_config(data, to, _finite_minutes(minutes), src_lang, tgt_lang, init_from or "", arch, warn)
    typer.echo(text.rstrip())
    typer.echo(f"\nWrote {path}. Next: nmt prepare --config {path} && nmt train --config {path}")


def _copy_example(name: str) -> None:
    """``nmt init --example NAME``: the corpus and its configs into this folder, and the next command."""
    from nmt.config.recipes import copy_example

    written = copy_example(name, Path.cwd())
    typer.echo("\n".join(f"Wrote {path.relative_to(Path.cwd())}" for path in written))
    config = next(p for p in written if p.parent.name == "configs").relative_to(Path.cwd())
    typer.echo(f"Next: nmt train --config {config}   (prepares the data first)")


@app.command()
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
    from nmt.train import distributed
    from nmt.train.launch import refuse_new_run_over_old
    from nmt.train.launch import train as train_models
    from nmt.train.metrics import MetricsFile, RunSummary
    from nmt.train.state import TrainingInterrupted

    cfg = _load(config, set_)
    cfg.init_from = init_from or cfg.init_from
    if minutes is not None:
        cfg.train.max_minutes = _finite_minutes(minutes)
    elif resume:
        _keep_the_runs_budget(cfg, set_, log=lambda msg: typer.echo(msg, err=True))
    requested = _device(cfg, device)
    ddp = distributed.setup(requested, cfg.train.ddp_timeout_minutes)  # under torchrun: join the process group
    try:
        with contextlib.ExitStack() as held:
            if ddp.is_main:  # the ranks of one torchrun share the run: rank 0 holds it for them
                held.enter_context(_writing(cfg, f"nmt train --config {config}" + (" --resume" if resume else "")))
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
                    _learning_curves(model.run_dir)
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


def _finite_minutes(minutes: float) -> float:
    """--minutes as a budget: a number of minutes (``inf`` or ``nan`` is no budget to plan a run by)."""
    if not math.isfinite(minutes):
        raise NmtError(f"--minutes: got {minutes}, expected a number of minutes (0: no budget).")
    return minutes


BUDGET_KEYS = ("max_minutes",)  # the time budget; an epoch cap is the file's, as any other setting


def _keep_the_runs_budget(cfg: Config, set_: list[str] | None, log) -> None:
    """``--resume`` without ``--minutes``: the budget the run was started with (its own
    config.yaml, ``--set`` included), not what the config file says now, unless ``--set``
    gives one again. (Before, a run started with --set train.max_minutes=1 resumed to the
    file's 5 minutes.)"""
    from nmt.config.parsing import parse_override
    from nmt.config.paths import run_paths

    run = run_paths(cfg)
    if not run.config.is_file() or not run.trained_checkpoints():
        return
    given = {parse_override(text)[0] for text in set_ or []}
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
    from nmt.train.align_probe import check_aligner

    check_aligner(cfg)
    if ddp.is_main:
        report = run_prepare(cfg, log=lambda msg: typer.echo(msg, err=True))
        if not report.reused:
            typer.echo(report.summary())
    ddp.barrier()
    if not is_prepared(cfg):
        raise NmtError(f"Prepared data missing in {cfg.prepared_dir} after rank 0 prepared it: is it on a shared disk?")


@app.command()
@user_errors
def translate(
    config: OptionalConfigOption = None,
    set_: SetOption = None,
    checkpoint: CheckpointsOption = None,
    model: ModelOption = None,
    input_: Annotated[
        Path | None, typer.Option("--input", "-i", help="Text file, one sentence per line (default: stdin).")
    ] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Where to write translations (default: stdout).")
    ] = None,
    text: Annotated[
        list[str] | None,
        typer.Option("--text", help="Translate this sentence instead of a file; repeat for several, in order."),
    ] = None,
    beam_size: BeamOption = None,
    plot_attention: PlotAttentionOption = None,
    plot_count: Annotated[int, typer.Option("--plot-count", min=1, help="How many sentences to plot.")] = 5,
    plot_format: Annotated[
        str, typer.Option("--plot-format", help="png, svg or pdf: the heatmaps' format in a --plot-attention folder.")
    ] = "png",
    n_best: NBestOption = None,
    device: DeviceOption = None,
    engine: EngineOption = "torch",
    tgt_lang: TgtLangOption = None,
    threads: ThreadsOption = "auto",
) -> None:
    """Translate text: exactly one output line per input line (an empty line gives an empty line).

    Sentences are batched by length and the original order is restored. Greedy (--beam-size 1) or
    beam search with length normalisation (decode.length_penalty). With --n-best K: K lines per
    input line instead, "number<TAB>score<TAB>translation" (score: the ranking score of search).
    """
    from nmt.pipelines.translate import read_input_lines

    if text and input_ is not None:
        raise NmtError("Give either --text or --input, not both.")
    translator = _translator(config, set_, checkpoint, model, device, engine, tgt_lang, beam_size, threads)
    lines = list(text) if text else read_input_lines(str(input_) if input_ else None)
    if n_best is None:
        written = translator.translate(lines, progress=input_ is not None)
    else:
        found = translator.search(lines, n_best=n_best, progress=input_ is not None)
        written = [
            f"{number}\t{hypothesis.score:.4f}\t{translator.detokenize(hypothesis)}"
            for number, hypotheses in enumerate(found, 1)
            for hypothesis in hypotheses
        ]
    _write_lines(written, output)
    if plot_attention is not None:
        _plot_attention(translator, lines, plot_attention, plot_count, plot_format)


def _write_lines(lines: list[str], output: Path | None) -> None:
    """To ``output`` (atomically), or to stdout."""
    if output is None:
        for line in lines:
            sys.stdout.write(line + "\n")
        return
    from nmt.core.fileio import write_lines_atomic

    write_lines_atomic(output, lines)
    typer.echo(f"Wrote {len(lines)} lines to {output}", err=True)


@app.command()
@user_errors
def score(
    config: OptionalConfigOption = None,
    set_: SetOption = None,
    checkpoint: CheckpointsOption = None,
    model: ModelOption = None,
    src: Annotated[Path, typer.Option("--src", help="Source sentences, one per line.")] = ...,  # type: ignore[assignment]
    tgt: Annotated[Path, typer.Option("--tgt", help="Their translations, line-aligned with --src.")] = ...,  # type: ignore[assignment]
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Where to write (default: stdout).")] = None,
    device: DeviceOption = None,
) -> None:
    """Forced decoding: how probable the model finds given translations of given sources.

    One TSV line per pair: total log-probability (natural log, <eos> included), log-probability
    per subword, subwords (+ <eos>). The corpus perplexity goes to stderr.
    """
    from nmt.pipelines.translate import read_input_lines

    sources, targets = read_input_lines(str(src)), read_input_lines(str(tgt))
    if len(sources) != len(targets):
        raise NmtError(f"{src} has {len(sources)} lines but {tgt} has {len(targets)}: they must be line-aligned.")
    translator = _translator(config, set_, checkpoint, model, device)
    scored = translator.score(sources, targets, progress=True)
    counts = [len(h.token_logprobs) for h in scored]
    _write_lines([f"{h.log_prob:.4f}\t{h.log_prob / n:.4f}\t{n}" for h, n in zip(scored, counts)], output)
    total = sum(h.log_prob for h in scored)
    typer.echo(
        f"{len(scored)} pairs, {sum(counts)} subwords: log-probability {total:.2f}, "
        f"perplexity {math.exp(-total / max(1, sum(counts))):.2f}",
        err=True,
    )


PLOT_SUFFIXES_BY_NAME = ("png", "svg", "pdf")
PLOT_SUFFIXES = tuple(f".{name}" for name in PLOT_SUFFIXES_BY_NAME)


def _plot_attention(translator, lines: list[str], target: Path, count: int, image_format: str = "png") -> None:
    """Heatmaps of the first ``count`` non-empty lines: into a folder, or one file for one sentence."""
    from nmt.core.plotting import plot_attention

    if image_format not in PLOT_SUFFIXES_BY_NAME:
        raise NmtError(f"--plot-format: got {image_format!r}, expected one of {', '.join(PLOT_SUFFIXES_BY_NAME)}.")

    from nmt.core.registry import ATTENTIONS

    attention = translator.loaded.config.model.attention
    if not ATTENTIONS[attention].has_weights:
        typer.echo(f"model.attention is {attention!r}: the model has no attention weights to plot.", err=True)
        return
    single_file = target.suffix.lower() in PLOT_SUFFIXES
    if single_file and len(lines) != 1:
        raise NmtError(
            f"--plot-attention {target} names one file; use it with --text, or give a folder for a file of lines."
        )
    numbered = [(number, line) for number, line in enumerate(lines, 1) if line.strip()][:count]
    heatmaps = translator.heatmaps([line for _, line in numbered])
    for (number, _), heatmap in zip(numbered, heatmaps):
        path = target if single_file else target / f"attention_{number:04d}.{image_format}"
        plot_attention(
            heatmap.src_labels,
            heatmap.tgt_labels,
            heatmap.weights,
            path,
            title=f"{heatmap.source}\n{heatmap.translation}",
        )
    typer.echo(f"Wrote {len(heatmaps)} attention heatmap(s) to {target}", err=True)


@app.command()
@user_errors
def align(
    source: Annotated[Path, typer.Option("--src", help="The source sentences, one a line.")],
    target: Annotated[
        Path | None,
        typer.Option("--tgt", help="Their translations, one a line (default: the model's own, written beside)."),
    ] = None,
    config: OptionalConfigOption = None,
    set_: SetOption = None,
    checkpoint: CheckpointsOption = None,
    model: ModelOption = None,
    aligner: Annotated[
        str, typer.Option("--aligner", help="model (its attention) or eflomal (the reference aligner).")
    ] = "model",
    layer: Annotated[
        int | None, typer.Option("--layer", help="A Transformer's decoder layer to read (default: its aligning layer).")
    ] = None,
    heads: Annotated[
        str, typer.Option("--heads", help="A Transformer's heads to average, e.g. 0,2 (default: all).")
    ] = "",
    step: Annotated[
        str,
        typer.Option(
            "--step", help="produced (the step that emits a target word) or input (the step it is fed: Shift-Att)."
        ),
    ] = "produced",
    reference: Annotated[
        Path | None,
        typer.Option("--reference", help="A Pharaoh file to score against (AER, precision, recall on stderr)."),
    ] = None,
    device: DeviceOption = None,
) -> None:
    """Write word alignments in the Pharaoh format (i-j: source word i, target word j), one line per
    sentence pair: from the model's attention under forced decoding, or (--aligner eflomal) from the
    reference aligner run both ways over the pairs and the run's training pairs. Without --tgt, the
    model translates first and each line is "translation ||| links". Words are whitespace-separated."""
    from nmt.data.alignments import eflomal_alignments, read_links
    from nmt.pipelines.align import gold_agreement, model_lines, parse_heads, refuse_attention_choices
    from nmt.pipelines.translate import read_input_lines

    sources = read_input_lines(str(source))
    targets = read_input_lines(str(target)) if target is not None else None
    if targets is not None and len(targets) != len(sources):
        raise NmtError(f"{source} has {len(sources)} lines and {target} {len(targets)}: give one translation a line.")
    if aligner not in ("model", "eflomal"):
        raise NmtError(f"--aligner {aligner!r}: model or eflomal.")
    gold = read_links(reference, len(sources)) if reference is not None else None  # before any work
    if aligner == "eflomal":
        refuse_attention_choices(layer, heads, step)
        if targets is None:
            raise NmtError("--aligner eflomal aligns given pairs: give --tgt.")
        found = eflomal_alignments(sources, targets, _training_pairs(config, set_))
        written = [links.pharaoh() for links in found]
    else:
        chosen = parse_heads(heads)
        translator = _translator(config, set_, checkpoint, model, device)
        written, found = model_lines(translator, sources, targets, layer, chosen, step)
    if gold is not None:
        typer.echo(gold_agreement(gold, sources, targets, written, found, str(reference)), err=True)
    _write_lines(written, None)


def _training_pairs(config: Path | None, set_: list[str] | None) -> tuple[list[str], list[str]]:
    """The prepared training pairs of --config's run, for eflomal's statistics (none without one)."""
    if config is None:
        return [], []
    from nmt.pipelines.align import training_pairs

    pairs = training_pairs(_load(config, set_))
    if not pairs[0]:
        raise NmtError(f"{config}'s run has no prepared training pairs: run nmt prepare --config {config} first.")
    return pairs


@app.command()
@user_errors
def evaluate(
    config: OptionalConfigOption = None,
    set_: SetOption = None,
    checkpoint: CheckpointsOption = None,
    model: ModelOption = None,
    src: Annotated[
        Path | None, typer.Option("--src", help="Source file to translate (default: the prepared test split).")
    ] = None,
    ref: Annotated[
        list[Path] | None,
        typer.Option(
            "--ref",
            help="Reference file, line-aligned with --src; repeat for several references (an empty line = none).",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON on stdout.")] = False,
    align: Annotated[
        bool,
        typer.Option(
            "--align", help="Also hold the model's attention against eflomal's word alignments of the pairs (AER)."
        ),
    ] = False,
    beam_size: BeamOption = None,
    device: DeviceOption = None,
    engine: EngineOption = "torch",
    threads: ThreadsOption = "auto",
) -> None:
    """Translate a test set and score it with sacrebleu (BLEU, chrF, TER) against all references.

    Scores are computed on detokenized text. To <run_dir>/eval/ go the translations (NAME.hyp), the
    sources they translate line for line (NAME.src), both beside the references (NAME.tsv) and a
    JSON report. With --align, the word alignments of every (source, reference) pair by the model's
    attention and by eflomal (NAME.model.align, NAME.eflomal.align) and their agreement.
    """
    from nmt.config.paths import run_paths
    from nmt.pipelines.evaluate import evaluate as run_evaluate
    from nmt.pipelines.evaluate import evaluation_set
    from nmt.pipelines.evaluate import write_report as run_evaluate_report

    if align:
        from nmt.data.alignments import require_eflomal

        require_eflomal("nmt evaluate --align")  # before anything is translated
    translator = _translator(config, set_, checkpoint, model, device, engine, beam_size=beam_size, threads=threads)
    cfg = translator.loaded.config
    test_set, name = evaluation_set(cfg, src, ref or [])
    report = run_evaluate(translator, test_set, name, checkpoint or ["best"])
    if align:
        from nmt.pipelines.align import alignment_agreement, training_pairs

        report["alignment"] = alignment_agreement(translator, test_set, name, training_pairs(cfg))
        run_evaluate_report(translator, name, report)
    if as_json:
        typer.echo(json.dumps(report, ensure_ascii=False))
        return
    _print_report(report, name, run_paths(cfg).eval_dir)


def _print_report(report: dict, name: str, eval_dir: Path) -> None:
    """``nmt evaluate``'s report, as people read it."""
    references = "1 reference" if report["num_references"] == 1 else f"up to {report['num_references']} references"
    typer.echo(f"{name}: {report['num_sentences']} sentences, {references} each")
    for metric in ("bleu", "chrf", "ter"):
        typer.echo(f"{metric.upper():5s} {report[metric]:6.2f}   {report['signature'][metric]}")
    repeats = report["repeated_words"]
    typer.echo(
        f"Outputs with a word repeated back to back: {repeats['hypotheses']:.1f} % "
        f"(references: {repeats['references']:.1f} %)"
    )
    if "alignment" in report:
        found = report["alignment"]
        typer.echo(
            f"Attention against eflomal's word alignments: AER {found['aer']:.3f}, precision "
            f"{found['precision']:.3f}, recall {found['recall']:.3f} ({found['sentences']:,} pairs)"
        )
    typer.echo(f"Hypotheses and report in {eval_dir}")


def _note(text: str) -> None:
    """A line for the person running the command, on stderr (stdout carries only its output)."""
    typer.echo(text, err=True)


def _translator(
    config: Path | None,
    set_: list[str] | None,
    checkpoints: list[str] | None,
    models: list[Path] | None,
    device: str | None,
    engine: str = "torch",
    tgt_lang: str | None = None,
    beam_size: int | None = None,
    threads: str = "auto",
):
    """A Translator from --config (+ --checkpoint ...) or from --model package(s), into ``tgt_lang``,
    with the command's decoding settings made in one place: the config's (a package's own, or
    --config's with every --set), then --set decode.* for a package, then --beam-size; and its CPU
    threads (--threads: a count is set before the model loads, which onnxruntime reads; auto paces
    PyTorch's decoding steps)."""
    from nmt.config.parsing import decoding_settings
    from nmt.core.threads import DECODING, make_tuner, parse_setting
    from nmt.pipelines.translate import Translator
    from nmt.runtime.loading import check_engine, load_checkpoints, load_packages

    check_engine(engine)
    setting = parse_setting(threads, "--threads")
    if models:
        if config is not None or checkpoints:
            raise NmtError(
                "--model carries its own config and weights: give --model alone (with --set decode.KEY=VALUE to "
                "change how it decodes), not with --config or --checkpoint."
            )
        chosen = _device_named(device or "auto")
        tuner = (
            make_tuner(setting, chosen, settings=DECODING, say=_note)
            if engine == "torch" or setting != "auto"
            else None
        )
        loaded = load_packages(models, chosen, engine)
        return Translator(loaded, tgt_lang, decoding_settings(loaded.config.decode, set_, beam_size), tuner)
    if engine != "torch":
        raise NmtError(f"--engine {engine} runs model packages: give --model PKG (nmt export RUN PKG).")
    if config is None:
        raise NmtError("Give --config FILE (the training config), or --model DIR (a package from `nmt export`).")
    cfg = _load(config, set_)
    chosen = _device(cfg, device)
    tuner = make_tuner(setting, chosen, settings=DECODING, say=_note)
    loaded = load_checkpoints(cfg, checkpoints or ["best"], chosen)
    return Translator(loaded, tgt_lang, decoding_settings(cfg.decode, beam_size=beam_size), tuner)


TokenOption = Annotated[
    str,
    typer.Option(
        "--token",
        envvar="NMT_SERVE_TOKEN",
        help="The token every API request must carry (the page is opened as /?token=TOKEN); "
        "default: a random one, printed in the address.",
    ),
]
NoTokenOption = Annotated[
    bool, typer.Option("--no-token", help="No token: any program on this machine may use the API.")
]
AllowHostOption = Annotated[
    list[str] | None,
    typer.Option(
        "--allow-host", help="Another name the page is opened by (e.g. this machine's name on the network); repeatable."
    ),
]


def _serve_token(token: str, no_token: bool) -> str:
    """The given token, none with --no-token, else a new random one (as Jupyter makes at each start)."""
    if no_token and token:
        raise NmtError("--no-token and --token contradict each other: give one.")
    return "" if no_token else token or secrets.token_urlsafe(18)


@app.command()
@user_errors
def serve(
    config: OptionalConfigOption = None,
    set_: SetOption = None,
    checkpoint: CheckpointsOption = None,
    model: Annotated[
        list[Path] | None,
        typer.Option("--model", help="A model package folder from `nmt export`; repeat to show models side by side."),
    ] = None,
    host: Annotated[str, typer.Option("--host", help="Address to listen on (loopback by default).")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="Port to listen on.")] = 8000,
    device: DeviceOption = None,
    token: TokenOption = "",
    no_token: NoTokenOption = False,
    allow_host: AllowHostOption = None,
    max_work: Annotated[
        int | None,
        typer.Option(
            "--max-work", min=1, help="One request's work limit: characters x beam size, summed (413 beyond; 256000)."
        ),
    ] = None,
    max_queued: Annotated[
        int | None,
        typer.Option("--max-queued", min=1, help="Texts waiting per model before 503 + Retry-After (512)."),
    ] = None,
    max_request_seconds: Annotated[
        float | None,
        typer.Option(
            "--max-request-seconds",
            min=1,
            help="One translation request's time, waiting included; beyond, its work is dropped and it gets 503 (60).",
        ),
    ] = None,
    engine: EngineOption = "torch",
    tgt_lang: TgtLangOption = None,
    threads: ThreadsOption = "auto",
) -> None:
    """A local page that translates as you type and draws attention, and its JSON API.

    Open http://HOST:PORT/ in a browser; the API is under /api (docs/reference/api.md). Several --model
    folders are shown side by side; --config (with --checkpoint) serves a training run. Ctrl-C stops.
    """
    from nmt.serve.app import LOCAL_HOSTS, bind, build_app, page_address, run_server
    from nmt.serve.requests import Limits

    translators = _served(config, set_, checkpoint, model, device, engine, tgt_lang, threads)
    token = _serve_token(token, no_token)
    listening = bind(host, port)  # before a word is printed: a busy port is an error, not an address
    address = page_address(host, listening.getsockname()[1], token)
    typer.echo(f"Serving {', '.join(translators)} on {address} (Ctrl-C stops)", err=True)
    _warn_if_reachable(host, token)
    limits = Limits(
        max_work=max_work or Limits.max_work,
        max_queued=max_queued or Limits.max_queued,
        max_seconds=max_request_seconds or Limits.max_seconds,
    )
    hosts = (*LOCAL_HOSTS, *([host] if host not in ("0.0.0.0", "::") else []), *(allow_host or []))
    run_server(build_app(translators, limits, token, hosts), listening)


def _served(config, set_, checkpoint, models, device, engine, tgt_lang, threads: str = "auto") -> dict:
    """The models to serve by name: each --model package (named after its folder; a repeated
    name gets a number), side by side, or the run of --config; each paces its own decoding."""
    if not models:
        translator = _translator(config, set_, checkpoint, None, device, engine, tgt_lang, threads=threads)
        return {Path(translator.loaded.config.run_dir).name: translator}
    translators: dict = {}
    for path in models:
        name = path.resolve().name
        name = name if name not in translators else f"{name}-{len(translators) + 1}"
        translators[name] = _translator(config, set_, checkpoint, [path], device, engine, tgt_lang, threads=threads)
    return translators


def _warn_if_reachable(host: str, token: str) -> None:
    """Listening beyond loopback: say who can reach the page."""
    if host not in ("127.0.0.1", "localhost", "::1"):
        typer.echo(
            f"warning: listening on {host}: anyone who can reach this machine on the network can open the page "
            "and use the API"
            + (" with the token." if token else "; without --no-token every request carries a token.")
            + " The page answers only to the names it is opened by: add this machine's with --allow-host NAME.",
            err=True,
        )


RunDirArgument = Annotated[Path, typer.Argument(help="A run directory (run_dir of a config).")]


CTranslate2Option = Annotated[
    bool,
    typer.Option(
        "--ctranslate2",
        help="Also the model as a CTranslate2 model (a Transformer; --engine ctranslate2 runs it; needs "
        "`pip install ctranslate2`).",
    ),
]
QuantizationOption = Annotated[
    str | None,
    typer.Option(
        "--quantization",
        help="--ctranslate2 and --argos: how its weights are stored: int8 (the default, the fastest on a CPU), "
        "int8_float32, "
        "float32 (PyTorch's outputs exactly), float16, bfloat16, int16, int8_float16, int8_bfloat16.",
    ),
]
ArgosOption = Annotated[
    bool,
    typer.Option(
        "--argos",
        help="Write an Argos Translate package (OUT_DIR.argosmodel, what LibreTranslate installs) of a "
        "Transformer instead: its CTranslate2 model (--quantization) and SentencePiece model.",
    ),
]


@app.command()
@user_errors
def export(
    run_dir: RunDirArgument,
    out_dir: Annotated[Path, typer.Argument(help="The folder to create (must not exist, or be empty).")],
    checkpoint: CheckpointOption = "best",
    onnx: Annotated[
        bool,
        typer.Option("--onnx", help="Also the encoder and one decoder step as ONNX graphs (--engine onnx runs them)."),
    ] = False,
    ctranslate2: CTranslate2Option = False,
    quantization: QuantizationOption = None,
    argos: ArgosOption = False,
    web: Annotated[
        bool, typer.Option("--web", help="Write a static page that translates in the browser instead of a package.")
    ] = False,
    runtime: Annotated[
        Path | None,
        typer.Option("--runtime", help="--web: the node_modules holding onnxruntime-web and sentencepiece-js."),
    ] = None,
) -> None:
    """Write a self-contained model package: weights (safetensors), the resolved config, both
    SentencePiece models and a model card. Use it with `nmt translate --model OUT_DIR`. With
    --onnx, the graphs are checked against PyTorch before they are kept (needs onnx and onnxruntime:
    `pip install onnx onnxruntime`); with --ctranslate2, a CTranslate2 model of the Transformer (int8 by
    default), checked against PyTorch likewise.
    With --web, a folder any static file host serves: the page translates as you type and draws
    attention, offline (onnxruntime-web and SentencePiece in the page; `npm ci --prefix web` once).
    With --argos, an Argos Translate package that LibreTranslate and `argospm` install."""
    from nmt.core.locking import holding

    if quantization is not None and not (ctranslate2 or argos):
        raise NmtError(
            f"--quantization {quantization} sets how a CTranslate2 model's weights are stored: add --ctranslate2 "
            "(or --argos), or drop it: nothing else reads it."
        )
    quantization = quantization or "int8"
    if web or argos:
        _export_elsewhere(run_dir, out_dir, checkpoint, runtime, quantization if argos else None)
        return
    from nmt.export.package import export_model

    with holding(run_dir, f"nmt export {run_dir} {out_dir}", create=False):
        path = export_model(run_dir, out_dir, checkpoint, onnx, quantization if ctranslate2 else None)
    typer.echo(f"Exported {run_dir} ({checkpoint}) to {path}; see {path / 'MODEL_CARD.md'}")


def _export_elsewhere(run_dir: Path, out_dir: Path, checkpoint: str, runtime: Path | None, argos: str | None) -> None:
    """``nmt export --web`` (the offline page), or ``--argos`` (an Argos Translate package of that quantization)."""
    from nmt.core.locking import holding

    if argos is not None:
        from nmt.export.argos import export_argos

        with holding(run_dir, f"nmt export {run_dir} {out_dir} --argos", create=False):
            path = export_argos(run_dir, out_dir, checkpoint, argos)
        typer.echo(
            f"Wrote the Argos Translate package of {run_dir} ({checkpoint}) to {path}; install it with "
            f"argostranslate.package.install_from_path (docs/portable.md; offline: ARGOS_CHUNK_TYPE=SPACY)"
        )
        return
    from nmt.export.web_page import export_web, folder_size

    with holding(run_dir, f"nmt export {run_dir} {out_dir} --web", create=False):
        path = export_web(run_dir, out_dir, checkpoint, runtime)
    typer.echo(
        f"Wrote the page for {run_dir} ({checkpoint}) to {path} ({folder_size(path) / 1e6:.1f} MB); "
        f"serve it with: python3 -m http.server --directory {path}"
    )


@app.command()
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
    from nmt.train.metrics import MetricsFile, RunSummary
    from nmt.train.timeline import read_timeline

    if image_format not in PLOT_SUFFIXES_BY_NAME:
        raise NmtError(f"--format: got {image_format!r}, expected one of {', '.join(PLOT_SUFFIXES_BY_NAME)}.")
    run = RunPaths(run_dir)
    drawn = _learning_curves(run_dir, output or run.learning_curves.with_suffix(f".{image_format}"))
    summary = RunSummary.of(MetricsFile(run.metrics).read())
    if drawn is None or summary is None:
        raise NmtError(f"No validation in {run.metrics} yet: it is written after the first epoch of `nmt train`.")
    typer.echo(f"Wrote {drawn[0]} ({summary.trained_line()}; {summary.best_line()})")
    records = read_timeline(run.timeline) if run.timeline.is_file() else []
    if records and records[0]["probes"]:
        path = run.timeline_plot.with_suffix(f".{image_format}")
        count = plot_timeline(records, path)
        typer.echo(f"Wrote {path} (the first probe sentence at the end of each of {count} whole epochs)")


def _learning_curves(run_dir: Path, output: Path | None = None) -> tuple[Path, int] | None:
    """Plot RUN_DIR/metrics.jsonl to ``output`` (default RUN_DIR/learning_curves.png); None if it is empty."""
    from nmt.config.paths import RunPaths
    from nmt.core.plotting import plot_learning_curves
    from nmt.train.metrics import MetricsFile

    run = RunPaths(run_dir)
    records = MetricsFile(run.metrics).read()
    if not records:
        return None
    path = output or run.learning_curves
    plot_learning_curves(records, path)
    return path, len(records)


@app.command()
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
    from nmt.train.state import TrainingInterrupted

    cfg = _load(config, set_)
    if minutes is not None:
        cfg.train.max_minutes = _finite_minutes(minutes)
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
        with _writing(cfg, f"nmt tune --config {config}"):
            run_study(cfg, _device(cfg, device), raw_space, storage, log=lambda msg: typer.echo(msg, err=True))
    except TrainingInterrupted as exc:
        typer.echo(f"{exc} The study is kept in {cfg.run_dir}/tune: run the same command again to go on.", err=True)
        raise typer.Exit(130) from None


@app.command()
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


def main() -> None:
    app()


if __name__ == "__main__":
    main()
