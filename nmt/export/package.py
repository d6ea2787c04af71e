"""``nmt export``: a self-contained model package to share a trained model.

The package layout is ``nmt.config.paths.PackagePaths``; ``nmt.runtime.loading`` reads it back
(``nmt translate --model OUT_DIR`` needs nothing else).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from nmt.config.files import save_config
from nmt.config.parsing import config_from_dict
from nmt.config.paths import CHECKPOINT_NAMES, PackagePaths, prepared_paths, run_paths
from nmt.config.schema import Config, ModelConfig
from nmt.core.errors import NmtError
from nmt.core.fileio import (
    as_umask_allows,
    fsync_file,
    refuse_link,
    staged_folder,
    write_lines_atomic,
    write_text_atomic,
)
from nmt.core.registry import ARCHITECTURES
from nmt.data.languages import language_name
from nmt.data.references import read_references, write_references
from nmt.data.tokenizer import Tokenizer
from nmt.pipelines.prepare import load_report
from nmt.runtime.checkpoint import translation_weights
from nmt.runtime.ctranslate2_engine import FOLDER as CTRANSLATE2_FOLDER
from nmt.runtime.loading import (
    PACKAGE_FORMAT,
    check_weights_fit,
    load_checked_checkpoint,
    load_run,
    load_tokenizers,
    new_model,
    spm_hashes,
    weights_metadata,
    weights_shapes,
)
from nmt.runtime.onnx_engine import GRAPHS, graph_file
from nmt.runtime.package_files import MANIFEST_KEY, file_hashes, files_under
from nmt.training.metrics import MetricsFile, RunSummary
from nmt.training.timeline import FILE_BYTES, read_timeline_within


def checkpoint_label(checkpoint: str) -> str:
    """A checkpoint as a manifest names it: best, last or a file's name (never a local path)."""
    return checkpoint if checkpoint in CHECKPOINT_NAMES else Path(checkpoint).name


def _file_name(path: str) -> str:
    return Path(path).name if path else path


def _file_names(value: str | list[str]) -> str | list[str]:
    """A path, or a list of them, by file name (a key that takes either)."""
    return [_file_name(path) for path in value] if isinstance(value, list) else _file_name(value)


def without_local_paths(raw: dict) -> dict:
    """A config as a package carries it: the files it was trained from by name only (a record of
    which files, not of this machine's folders), its run and data folders the package itself
    (loading places both where the package is: nmt.runtime.loading.load_run)."""
    data = dict(raw["data"])
    for key in ("path", "distill_from", "synthetic_from"):
        data[key] = _file_names(data[key])
    for key in ("train", "dev", "test"):
        data[key] = {lang: _file_names(files) for lang, files in data[key].items()}
    data["related"] = {lang: _file_name(path) for lang, path in data["related"].items()}
    data["prepared_dir"] = "."
    return {**raw, "run_dir": ".", "init_from": _file_name(raw.get("init_from", "")), "data": data}


def _architecture(m: ModelConfig) -> tuple[str, str]:
    """The model card's title and its description of the model's layout: the family's own."""
    family = ARCHITECTURES[m.arch]
    return family.title, family.describe(m)


def _model_card(
    config: Config,
    payload: dict,
    parameters: int,
    report: dict | None,
    scores: dict | None,
    summary: RunSummary | None = None,
) -> str:
    m, progress, data, tok = config.model, payload.get("progress", {}), config.data, config.tokenizer
    vocabulary = (
        f"joint {tok.src_vocab_size} (shared embeddings)" if tok.joint else f"{tok.src_vocab_size}/{tok.tgt_vocab_size}"
    )
    kind, layout = _architecture(m)
    lines = [
        f"# {language_name(data.src_lang)} → {language_name(data.tgt_lang)} ({data.src_lang}→{data.tgt_lang}) {kind}",
        "",
        f"- **Model**: {parameters:,} parameters; {layout}; SentencePiece {tok.model_type} {vocabulary}.",
    ]
    if report:
        given = report.get("given_sets", {})
        how = f"{' and '.join(given)} given as files;" if given else "split by source sentence into"
        lines.append(
            f"- **Data**: `{_file_name(report['input_path'])}` (sha256 {report['input_sha256'][:16]}…): "
            f"{report['pairs_kept']:,} pairs kept; {how} train/dev/test = "
            + " / ".join(
                f"{report['split_pairs'][s]:,} pairs ({report['split_sources'][s]:,} sources)"
                for s in ("train", "dev", "test")
            )
            + "."
        )
    hardware = f"hardware: {payload.get('hardware', 'not recorded')}"
    if summary is not None:  # the run's own count, as its last log line and nmt plot give it
        lines.append(f"- **Training**: {summary.trained_line()}; {summary.best_line()} (greedy); {hardware}.")
    else:
        lines.append(
            f"- **Training**: {progress.get('epoch', '?')} epoch(s), {progress.get('step', '?')} steps, "
            f"{progress.get('train_seconds', 0):.0f} s of training up to this checkpoint; best dev BLEU "
            f"{progress.get('best_bleu', float('nan')):.2f} (greedy) at epoch {progress.get('best_epoch', '?')}; "
            f"{hardware}."
        )
    parent = payload.get("parent")
    if parent:
        own = f", test BLEU {parent['test_bleu']:.2f}" if parent.get("test_bleu") is not None else ""
        lines.append(
            f"- **Parent**: trained from `{parent['name']}` ({parent['pair']}, sha256 {parent['sha256'][:16]}…{own}) "
            "with `init_from`."
        )
    if scores:
        lines.append(
            f"- **Test** ({scores['num_sentences']} sentences, up to {scores['num_references']} references, beam "
            f"{scores.get('beam_size', '?')}): BLEU {scores['bleu']:.2f} (`{scores['signature']['bleu']}`), "
            f"chrF {scores['chrf']:.2f} (`{scores['signature']['chrf']}`), TER {scores['ter']:.2f}."
        )
    else:
        lines.append("- **Test**: not evaluated before export (`nmt evaluate` writes eval/test.report.json).")
    lines += ["", "Use it:", "", "```bash", 'nmt translate --model . --text "…"', "```", ""]
    return "\n".join(lines)


def _onnx_graphs(config: Config, weights: dict, src_tok, tgt_tok, root: Path) -> dict:
    """The model of ``weights`` as ONNX graphs in ``root`` (what the manifest records of them)."""
    from nmt.export.onnx_graphs import export_graphs

    model = new_model(config, src_tok, tgt_tok)  # the weights' shapes are the config's (check_weights_fit)
    model.load_state_dict(weights)
    return export_graphs(model, root)


def _ctranslate2(
    config: Config, weights: dict, tokenizers: tuple[Tokenizer, Tokenizer], root: Path, quantization: str
) -> dict:
    """The model of ``weights`` as a CTranslate2 model in ``root``/ctranslate2."""
    from nmt.export.ctranslate2_model import export_ctranslate2

    src_tok, tgt_tok = tokenizers
    model = new_model(config, src_tok, tgt_tok)
    model.load_state_dict(weights)
    return export_ctranslate2(model, src_tok, tgt_tok, root / CTRANSLATE2_FOLDER, quantization)


def _check_packageable(config: Config, run_dir: Path) -> None:
    """Refuse, before anything is written, a run of several members."""
    if config.train.members > 1:
        members = range(1, config.train.members + 1)
        raise NmtError(
            f"{run_dir} trained {config.train.members} members (train.members): a package holds one model. Export "
            f"each ({'; '.join(f'nmt export {run_dir}/member-{k} OUT-{k}' for k in members)}) and translate with "
            f"{' '.join(f'--model OUT-{k}' for k in members)}, which ensembles them."
        )


def _reports(config: Config) -> tuple[dict | None, dict | None]:
    """The run's prepare report and test scores, where it has them (the model card's)."""
    paths, eval_path = prepared_paths(config), run_paths(config).eval_report("test")
    report = load_report(paths) if paths.report.is_file() else None
    return report, json.loads(eval_path.read_text(encoding="utf-8")) if eval_path.is_file() else None


def _copy_test_set(test_set: Path, root: Path) -> None:
    """The test split with all its references, parsed and written anew (`nmt evaluate --model PKG`)."""
    if test_set.is_file() or test_set.is_symlink():
        refuse_link(test_set)
        references = read_references(test_set)
        write_references(root / test_set.name, zip(references.sources, references.references))


def _engine_files(staging: PackagePaths, onnx: bool, ctranslate2: bool) -> list[Path]:
    """The files an engine reads, whose hashes the manifest records (checked before each loads)."""
    files = [staging.weights, *(graph_file(staging.root, graph) for graph in GRAPHS if onnx)]
    return files + (files_under(staging.root / CTRANSLATE2_FOLDER) if ctranslate2 else [])


def export_model(
    run_dir: Path, out_dir: Path, checkpoint: str = "best", onnx: bool = False, ctranslate2: str | None = None
) -> Path:
    """Write a model package for ``run_dir``'s ``checkpoint`` into ``out_dir`` (which must not
    exist); ``onnx``: with the encoder and a decoder step as ONNX graphs (nmt/export/onnx_graphs.py);
    ``ctranslate2``: with a CTranslate2 model of that quantization (nmt/export/ctranslate2_model.py)."""
    from safetensors.torch import save_file

    if out_dir.exists() and any(out_dir.iterdir()):
        raise NmtError(f"{out_dir} exists and is not empty: choose a new folder for the model package.")
    config = load_run(run_dir)
    _check_packageable(config, run_dir)
    src_tok, tgt_tok = load_tokenizers(config)
    payload = load_checked_checkpoint(config, checkpoint, src_tok, tgt_tok)
    # one copy per name: safetensors refuses tensors that share memory (tied embeddings)
    weights = {name: tensor.contiguous().clone() for name, tensor in translation_weights(payload).items()}
    check_weights_fit(config, src_tok, tgt_tok, weights_shapes(weights), run_paths(config).checkpoint(checkpoint))
    parameters = sum(t.numel() for t in weights.values())
    report, scores = _reports(config)

    with staged_folder(out_dir) as root:
        staging = PackagePaths(root)
        save_file(weights, str(staging.weights), metadata=weights_metadata(config))
        as_umask_allows(staging.weights)  # safetensors writes it private
        fsync_file(staging.weights)  # on disk before the folder's rename makes the package visible
        save_config(config_from_dict(without_local_paths(config.to_dict())), staging.config)
        for tokenizer in (src_tok, tgt_tok):
            shutil.copyfile(tokenizer.path, staging.root / tokenizer.path.name)
        _copy_test_set(prepared_paths(config).multi("test"), staging.root)
        timeline = run_paths(config).timeline  # the probes' attention over training, for the page
        if timeline.is_file() or timeline.is_symlink():
            refuse_link(timeline)  # parsed and written anew, never copied: only timeline records reach the package
            records, _ = read_timeline_within(timeline, FILE_BYTES)  # within training's own bound
            write_lines_atomic(staging.root / timeline.name, (json.dumps(r) for r in records))
        graphs = _onnx_graphs(config, weights, src_tok, tgt_tok, staging.root) if onnx else None
        fast = _ctranslate2(config, weights, (src_tok, tgt_tok), staging.root, ctranslate2) if ctranslate2 else None
        manifest = {
            "format": PACKAGE_FORMAT,
            "parameters": parameters,
            "onnx": graphs,  # the ONNX graphs' names, inputs and outputs, or null
            "ctranslate2": fast,  # the CTranslate2 model's folder and quantization, or null
            "spm_sha256": spm_hashes(src_tok, tgt_tok),
            MANIFEST_KEY: file_hashes(staging.root, _engine_files(staging, onnx, bool(ctranslate2))),
            "exported_from": f"{Path(run_dir).resolve().name} ({checkpoint_label(checkpoint)})",  # no local paths
            "parent": payload.get("parent"),  # the model it was trained from (init_from), if any
            "test_scores": {"bleu": scores["bleu"], "chrf": scores["chrf"]} if scores else None,
        }
        write_text_atomic(staging.manifest, json.dumps(manifest, indent=2))
        summary = RunSummary.of(MetricsFile(run_paths(config).metrics).read())
        card = _model_card(config, payload, parameters, report, scores, summary)
        write_text_atomic(staging.model_card, card)
    return out_dir
