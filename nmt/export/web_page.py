"""``nmt export RUN DIR --web``: a static folder that translates as you type and draws attention
in any browser, offline, with no Python and no server of ours (any static file host will do)::

    index.html  translate.js  heat.js  page.css        the page (nmt/web/, heat.js from the served page)
    fonts/<script>.ttf                                 the Noto fonts of the scripts the vocabularies write
    model/encoder.onnx  model/decoder_step.onnx        the graphs of nmt/export/onnx_graphs.py, checked against PyTorch
    model/spm.<lang>.model  model/config.json          the tokenizers; decoding settings, state names, pieces
    runtime/ort.wasm.min.js  runtime/ort-wasm-simd-threaded.{mjs,wasm}   onnxruntime-web (npm)
    runtime/sentencepiece.js                           sentencepiece-js (npm): SentencePiece as WebAssembly

The runtime comes from npm, installed once beside the code rather than fetched at export time
(an export must work offline, and a page must not reach a CDN): ``npm ci --prefix web`` in a
checkout puts the pinned versions of ``web/package.json`` in ``web/node_modules``, which export
finds by itself; ``--runtime DIR`` (or ``NMT_WEB_RUNTIME``) names another ``node_modules``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from pathlib import Path

from nmt.config.paths import run_paths
from nmt.config.schema import Config
from nmt.core.errors import NmtError
from nmt.core.fileio import staged_folder, write_text_atomic
from nmt.core.fonts import SCRIPT_FONTS, script_font, script_of, served_font_faces
from nmt.core.registry import ARCHITECTURES
from nmt.data.languages import language_name
from nmt.export.onnx_graphs import export_graphs
from nmt.runtime.checkpoint import translation_weights
from nmt.runtime.loading import load_checked_checkpoint, load_run, load_tokenizers, model_for_weights, weights_shapes
from nmt.runtime.onnx_engine import INSTALL as ONNX_INSTALL

PACKAGE = Path(__file__).resolve().parents[1]  # nmt/
PAGE = PACKAGE / "web"
HEATMAP = PACKAGE / "serve" / "static" / "heat.js"
CHECKOUT = PACKAGE.parent  # a source checkout, where web/package.json pins the runtime
# file in node_modules -> its name in runtime/
RUNTIME_FILES = {
    "onnxruntime-web/dist/ort.wasm.min.js": "ort.wasm.min.js",
    "onnxruntime-web/dist/ort-wasm-simd-threaded.mjs": "ort-wasm-simd-threaded.mjs",
    "onnxruntime-web/dist/ort-wasm-simd-threaded.wasm": "ort-wasm-simd-threaded.wasm",
    "sentencepiece-js/dist/index.js": "sentencepiece.js",
}
# the decode settings search in the page follows (nmt/web/translate.js)
PAGE_DECODING = (
    "beam_size",
    "length_penalty",
    "length_form",
    "coverage_penalty",
    "no_repeat_span",
    "max_len_ratio",
    "max_len_offset",
    "max_input_len",
)
RUNTIME_PACKAGES = "onnxruntime-web@1.30.0 sentencepiece-js@1.1.0"  # as web/package.json pins them
INSTALL = (
    "The page needs onnxruntime-web and sentencepiece-js from npm, installed once: "
    f"`npm install {RUNTIME_PACKAGES}` in this folder (it makes ./node_modules, which nmt finds), or anywhere "
    "with --runtime PATH/TO/node_modules (or $NMT_WEB_RUNTIME); in a checkout of nmt, `npm ci --prefix web`."
)


def find_runtime(runtime: Path | None = None) -> Path:
    """The node_modules folder holding every file of ``RUNTIME_FILES``: ``runtime``, else
    $NMT_WEB_RUNTIME, else ./node_modules (npm install in the working folder), else a source
    checkout's web/node_modules (npm ci --prefix web); never a folder relative to where the
    package is installed. Refused, with every other missing piece of the page, when it is not there."""
    folder, looked = _runtime_folder(runtime)
    missing = [] if folder is not None else [f"onnxruntime-web and sentencepiece-js (looked in {looked}). {INSTALL}"]
    missing += [f"{name} (Python), which makes the page's graphs" for name in ("onnx", "onnxruntime") if not _has(name)]
    if missing:
        listed = "\n  ".join(missing)
        hint = f"\nFor the Python ones: {ONNX_INSTALL}." if any("(Python)" in m for m in missing) else ""
        raise NmtError(f"The offline page needs what is not installed here:\n  {listed}{hint}")
    assert folder is not None
    return folder


def _runtime_folder(runtime: Path | None) -> tuple[Path | None, str]:
    given = [Path(p) for p in (runtime, os.environ.get("NMT_WEB_RUNTIME")) if p]
    checkout = [CHECKOUT / "web" / "node_modules"] if (CHECKOUT / "web" / "package.json").is_file() else []
    candidates = given or [Path("node_modules"), *checkout]
    for folder in candidates:
        if all((folder / name).is_file() for name in RUNTIME_FILES):
            return folder, ""
    return None, ", ".join(str(folder.resolve()) for folder in candidates)


def _has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def page_config(config: Config, src_tok, tgt_tok, graphs: dict) -> dict:
    """What the page reads: languages, decoding settings, the graphs' state names, the pieces."""
    data = config.data
    return {
        "languages": {
            "src": data.src_lang,
            "tgt": data.tgt_lang,
            "src_name": language_name(data.src_lang),
            "tgt_name": language_name(data.tgt_lang),
        },
        "decode": {key: getattr(config.decode, key) for key in PAGE_DECODING},
        "state": graphs["state"],
        "memory": graphs["memory"],  # the graphs' memory tensors, in order
        # a Transformer's step also returns every layer's heads, which the page draws one at a time
        "heads": _head_grid(config, graphs),
        "spm": {"src": f"model/{src_tok.path.name}", "tgt": f"model/{tgt_tok.path.name}"},
        "pieces": {
            "src": src_tok.pieces(),
            "tgt": tgt_tok.pieces(),
        },
    }


SERVED_FONT_FACES = PACKAGE / "serve" / "static" / "style.css"


def page_fonts(tokenizers, folder: Path) -> list[str]:
    """Copy into ``folder`` the Noto font of each script the vocabularies write (as ``nmt serve``
    serves them: a machine without a Devanagari font would draw the translation as boxes), and
    return their ``@font-face`` rules, pointing at the copies. The rules are the served page's."""
    pieces = [piece for tok in tokenizers for piece in tok.pieces()]
    written = {script_of(char) for piece in pieces for char in piece} & set(SCRIPT_FONTS)
    rules = served_font_faces(SERVED_FONT_FACES.read_text(encoding="utf-8"))
    faces = []
    for script in sorted(script.lower() for script in written):
        font = script_font(script)
        if font is None:
            continue
        folder.mkdir(exist_ok=True)
        shutil.copyfile(font, folder / f"{script}.ttf")
        if script in rules:
            faces.append(rules[script].replace(f'url("/fonts/{script}.ttf")', f'url("fonts/{script}.ttf")'))
    return faces


def export_web(run_dir: Path, out_dir: Path, checkpoint: str = "best", runtime: Path | None = None) -> Path:
    """Write the page for ``run_dir``'s ``checkpoint`` into ``out_dir`` (new, or empty)."""
    if out_dir.exists() and any(out_dir.iterdir()):
        raise NmtError(f"{out_dir} exists and is not empty: choose a new folder for the page.")
    config = load_run(run_dir)
    node_modules = find_runtime(runtime)  # before anything is written
    if config.train.members > 1:
        raise NmtError(f"{run_dir} trained {config.train.members} members: export one, e.g. {run_dir}/member-1.")
    if config.data.related:
        raise NmtError(
            f"{run_dir} translates into {', '.join(config.data.targets)} (data.related): the offline page runs "
            "models of one target; `nmt export` packages it for `nmt translate --tgt-lang` and `nmt serve`."
        )
    codes = [
        f"tokenizer.{side}_code: {code}"
        for side, code in (("src", config.tokenizer.src_code), ("tgt", config.tokenizer.tgt_code))
        if code
    ]
    if codes:
        raise NmtError(
            f"{run_dir} reads language codes ({', '.join(codes)}), which the offline page does not add yet; "
            "`nmt export` packages it for `nmt translate` and `nmt serve`."
        )
    src_tok, tgt_tok = load_tokenizers(config)
    weights = translation_weights(load_checked_checkpoint(config, checkpoint, src_tok, tgt_tok))
    source = run_paths(config).checkpoint(checkpoint)
    model = model_for_weights(config, src_tok, tgt_tok, weights_shapes(weights), source)
    model.load_state_dict(weights)
    with staged_folder(out_dir) as staging:
        (staging / "model").mkdir()
        graphs = export_graphs(model, staging / "model")
        for tokenizer in (src_tok, tgt_tok):
            shutil.copyfile(tokenizer.path, staging / "model" / tokenizer.path.name)
        page = page_config(config, src_tok, tgt_tok, graphs)
        write_text_atomic(staging / "model" / "config.json", json.dumps(page, ensure_ascii=False))
        for name in ("index.html", "translate.js"):
            shutil.copyfile(PAGE / name, staging / name)
        faces = page_fonts((src_tok, tgt_tok), staging / "fonts")  # the fonts first: the page's rules use them
        write_text_atomic(staging / "page.css", "\n".join([*faces, (PAGE / "page.css").read_text(encoding="utf-8")]))
        shutil.copyfile(HEATMAP, staging / HEATMAP.name)
        (staging / "runtime").mkdir()
        for shipped, name in RUNTIME_FILES.items():
            shutil.copyfile(node_modules / shipped, staging / "runtime" / name)
        # readable by whatever serves it: a temporary folder and an atomic write are private by default
        staging.chmod(0o755)
        for written in (staging / "model" / "config.json", staging / "page.css"):
            written.chmod(0o644)
    return out_dir


def folder_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _head_grid(config: Config, graphs: dict) -> dict | None:
    """A model with heads, whose step returns them: its grid, which the page draws a head at a time."""
    grid = ARCHITECTURES[config.model.arch].head_grid(config.model)
    return {"layers": grid[0], "heads": grid[1]} if grid and "heads" in graphs["decoder_step"]["outputs"] else None
