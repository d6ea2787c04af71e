"""The command line's shared parts: the Typer app, the options several commands take, the handling
of a user's mistake (a short message, exit code 1, never a traceback), and the steps every
command of a kind shares (loading a config, holding a run, a device, a Translator)."""

from __future__ import annotations

import contextlib
import functools
import math
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from nmt.config.files import load_config
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

RunDirArgument = Annotated[Path, typer.Argument(help="A run directory (run_dir of a config).")]

# the formats a heatmap or a timeline is drawn in (--plot-format, nmt plot --format)
PLOT_SUFFIXES_BY_NAME = ("png", "svg", "pdf")

PLOT_SUFFIXES = tuple(f".{name}" for name in PLOT_SUFFIXES_BY_NAME)

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


def command_config(config: Path, overrides: list[str] | None) -> Config:
    return load_config(config, overrides or [])


@contextlib.contextmanager
def writing_run(cfg: Config, command: str):
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


def device_of(config: Config, device: str | None):
    """--device, else train.device."""
    return named_device(device or config.train.device)


def named_device(name: str):
    """The device, set up as every command runs on it (TF32 on where it is a GPU)."""
    from nmt.core.device import prepare_device

    return prepare_device(name)


def finite_minutes(minutes: float) -> float:
    """--minutes as a budget: a number of minutes (``inf`` or ``nan`` is no budget to plan a run by)."""
    if not math.isfinite(minutes):
        raise NmtError(f"--minutes: got {minutes}, expected a number of minutes (0: no budget).")
    return minutes


def write_output(lines: list[str], output: Path | None) -> None:
    """To ``output`` (atomically), or to stdout."""
    if output is None:
        for line in lines:
            sys.stdout.write(line + "\n")
        return
    from nmt.core.fileio import write_lines_atomic

    write_lines_atomic(output, lines)
    typer.echo(f"Wrote {len(lines)} lines to {output}", err=True)


def note(text: str) -> None:
    """A line for the person running the command, on stderr (stdout carries only its output)."""
    typer.echo(text, err=True)


def open_translator(*args, **kwargs):
    """``nmt.pipelines.translators.open_translator``, imported when a command needs it (``--help``
    stays quick), a capped thread count said on stderr."""
    from nmt.pipelines.translators import open_translator as opened

    return opened(*args, **{**kwargs, "say": note})


def draw_learning_curves(run_dir: Path, output: Path | None = None) -> tuple[Path, int] | None:
    """Plot RUN_DIR/metrics.jsonl to ``output`` (default RUN_DIR/learning_curves.png); None if it is empty."""
    from nmt.config.paths import RunPaths
    from nmt.core.plotting import plot_learning_curves
    from nmt.training.metrics import MetricsFile

    run = RunPaths(run_dir)
    records = MetricsFile(run.metrics).read()
    if not records:
        return None
    path = output or run.learning_curves
    plot_learning_curves(records, path)
    return path, len(records)
