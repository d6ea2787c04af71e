"""``nmt export``: a package, ONNX graphs, a CTranslate2 model, an Argos package, the offline page."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from nmt.cli.common import CheckpointOption, RunDirArgument, user_errors
from nmt.core.errors import NmtError

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
    hf: Annotated[
        bool,
        typer.Option(
            "--hf",
            help="Write a Hugging Face transformers folder (MarianMTModel, or M2M100ForConditionalGeneration) "
            "instead of a package.",
        ),
    ] = False,
) -> None:
    """Write a self-contained model package: weights (safetensors), the resolved config, both
    SentencePiece models and a model card. Use it with `nmt translate --model OUT_DIR`. With
    --onnx, the graphs are checked against PyTorch before they are kept (needs onnx and onnxruntime:
    `pip install onnx onnxruntime`); with --ctranslate2, a CTranslate2 model of the Transformer (int8 by
    default), checked against PyTorch likewise.
    With --web, a folder any static file host serves: the page translates as you type and draws
    attention, offline (onnxruntime-web and SentencePiece in the page; `npm ci --prefix web` once).
    With --argos, an Argos Translate package that LibreTranslate and `argospm` install.
    With --hf, a folder AutoModelForSeq2SeqLM and AutoTokenizer load with no custom code (a Transformer of
    model.norm: post and model.positions: marian; its generate() then translates as here)."""
    from nmt.core.locking import holding

    if quantization is not None and not (ctranslate2 or argos):
        raise NmtError(
            f"--quantization {quantization} sets how a CTranslate2 model's weights are stored: add --ctranslate2 "
            "(or --argos), or drop it: nothing else reads it."
        )
    quantization = quantization or "int8"
    if hf:
        if web or argos or onnx or ctranslate2:
            raise NmtError("--hf writes a folder of its own: give it without --web, --argos, --onnx or --ctranslate2.")
        _export_hf(run_dir, out_dir, checkpoint)
        return
    if web or argos:
        _export_elsewhere(run_dir, out_dir, checkpoint, runtime, quantization if argos else None)
        return
    from nmt.export.package import export_model

    with holding(run_dir, f"nmt export {run_dir} {out_dir}", create=False):
        path = export_model(run_dir, out_dir, checkpoint, onnx, quantization if ctranslate2 else None)
    typer.echo(f"Exported {run_dir} ({checkpoint}) to {path}; see {path / 'MODEL_CARD.md'}")


def _export_hf(run_dir: Path, out_dir: Path, checkpoint: str) -> None:
    """``nmt export --hf``: a folder transformers loads (nmt/export/huggingface.py)."""
    from nmt.core.locking import holding
    from nmt.export.huggingface import export_hf

    with holding(run_dir, f"nmt export {run_dir} {out_dir} --hf", create=False):
        path = export_hf(run_dir, out_dir, checkpoint)
    typer.echo(f"Wrote {path}: transformers.AutoModelForSeq2SeqLM.from_pretrained('{path}') loads it")


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
