"""``nmt prepare`` and ``nmt init``: the data a run trains on, and a first config for a corpus."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Annotated

import typer

from nmt.cli.common import (
    ConfigOption,
    InitFromOption,
    SetOption,
    command_config,
    finite_minutes,
    user_errors,
    writing_run,
)
from nmt.config.files import save_config
from nmt.core.errors import NmtError


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

    cfg = command_config(config, set_)
    cfg.init_from = init_from or cfg.init_from
    if download:
        from nmt.data.download import download_anki

        if cfg.data.train:
            raise NmtError("--download fetches a TSV for data.path, but this config trains on data.train's files.")
        cfg.data.path = str(download_anki(download, Path("data") / f"{download}-eng", url))
        typer.echo(f"Downloaded {cfg.data.path}", err=True)
    with writing_run(cfg, f"nmt prepare --config {config}"):
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


ArchOption = Annotated[
    str,
    typer.Option(
        "--arch",
        help="rnn or transformer: that family's measured recipe for the corpus, instead of the family measured "
        "ahead for its size and budget (write both to compare them on your data).",
    ),
]
ExampleOption = Annotated[
    str | None,
    typer.Option(
        "--example",
        help="Copy an example that ships with nmt (eng-mar: 33,725 English-Marathi pairs and their configs; "
        "eng-hin: 2,549 English-Hindi pairs and the small-corpus recipes) "
        "into this folder instead.",
    ),
]
FromHfOption = Annotated[
    str | None,
    typer.Option(
        "--from-hf",
        help="Import a Hugging Face translation model (a folder save_pretrained wrote, or a name to download: "
        "Marian / OPUS-MT, M2M100 / NLLB-200: give their --src-lang and --tgt-lang) as a run every command uses; with "
        "a corpus, also the config that fine-tunes it on it.",
    ),
]
ImportRunDirOption = Annotated[
    Path | None, typer.Option("--run-dir", help="Where --from-hf writes the run (default: runs/NAME).")
]


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
    arch: ArchOption = "",
    from_hf: FromHfOption = None,
    run_dir: ImportRunDirOption = None,
    example: ExampleOption = None,
) -> None:
    """Write a first config for your corpus: it counts pairs, sources and lengths, finds the scripts and the
    languages, and picks the recipe and the model family (RNN or Transformer) measured for a corpus of that size,
    that budget and this machine (with --init-from: the recipe that continues that model, beside its own corpus
    where its target shares your target's script).
    With --example NAME, copy an example corpus and its configs here instead; with --from-hf MODEL, import a
    pretrained model first (and, given a corpus, write the config that fine-tunes it: init_from the import)."""
    if from_hf is not None:
        if example is not None or init_from:
            raise NmtError("--from-hf is the model to start from: give it without --example or --init-from.")
        imported = _import_hf(from_hf, run_dir, src_lang, tgt_lang)
        if not data:
            typer.echo(f"Next, to fine-tune it on your pairs: nmt init PAIRS --init-from {imported.run_dir}")
            return
        init_from, src_lang, tgt_lang = imported.run_dir, imported.data.src_lang, imported.data.tgt_lang
    if example is not None:
        if data:
            raise NmtError("Give a corpus of your own, or --example NAME, not both.")
        _copy_example(example)
        return
    if not data:
        raise NmtError("Give the corpus to write a config for (nmt init FILE), or --example NAME.")
    from nmt.pipelines.init import init_config

    warn = functools.partial(typer.echo, err=True)
    path, text = init_config(data, to, finite_minutes(minutes), src_lang, tgt_lang, init_from or "", arch, warn)
    typer.echo(text.rstrip())
    typer.echo(f"\nWrote {path}. Next: nmt prepare --config {path} && nmt train --config {path}")


def _import_hf(name: str, run_dir: Path | None, src_lang: str, tgt_lang: str):
    """``nmt init --from-hf NAME``: the import, into ``run_dir`` (default runs/NAME)."""
    from nmt.pipelines.huggingface_import import import_hf

    out = run_dir or Path("runs") / Path(name.rstrip("/")).name
    imported = import_hf(name, out, src_lang, tgt_lang, functools.partial(typer.echo, err=True))
    typer.echo(
        f"Wrote {out} ({imported.data.src_lang}-{imported.data.tgt_lang}): nmt translate --config {out}/config.yaml"
    )
    return imported


def _copy_example(name: str) -> None:
    """``nmt init --example NAME``: the corpus and its configs into this folder, and the next command."""
    from nmt.config.recipes import copy_example

    written = copy_example(name, Path.cwd())
    typer.echo("\n".join(f"Wrote {path.relative_to(Path.cwd())}" for path in written))
    config = next(p for p in written if p.parent.name == "configs").relative_to(Path.cwd())
    typer.echo(f"Next: nmt train --config {config}   (prepares the data first)")
