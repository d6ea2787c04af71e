"""Model packages: a self-contained folder to share a trained model.

``OUT_DIR/``::

    model.safetensors            the weights (no pickle: safe to load from anyone)
    config.yaml                  the resolved config, run_dir and data.prepared_dir = this folder
    spm.<src>.model, spm.<tgt>.model
    manifest.json                format, SentencePiece hashes, what it was exported from
    MODEL_CARD.md                data, split sizes, training, test scores with signatures

``nmt translate --model OUT_DIR`` and ``nmt evaluate --model OUT_DIR`` need nothing else.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import torch
import yaml

from nmt.config import Config, config_from_dict, save_config
from nmt.data.prepare import load_report, prepared_paths
from nmt.errors import NmtError
from nmt.fileio import sha256_file, write_text_atomic
from nmt.model.seq2seq import Seq2Seq
from nmt.tokenizer import Tokenizer
from nmt.train.checkpoint import check_compatible, checkpoint_path, load_checkpoint

PACKAGE_FORMAT = 1
WEIGHTS = "model.safetensors"


def load_run_config(run_dir: Path) -> Config:
    """The resolved config a run saved in <run_dir>/config.yaml."""
    path = run_dir / "config.yaml"
    if not path.is_file():
        raise NmtError(f"{path} not found: is {run_dir} a run directory (written by `nmt train`)?")
    with open(path, encoding="utf-8") as handle:
        return config_from_dict(yaml.safe_load(handle))


def _model_card(config: Config, payload: dict, parameters: int, report: dict | None, scores: dict | None) -> str:
    m, progress, data = config.model, payload.get("progress", {}), config.data
    lines = [
        f"# {data.src_lang}→{data.tgt_lang} attention-based RNN translation model",
        "",
        f"- **Model**: {parameters:,} parameters; embeddings {m.embed_dim}, BiGRU {m.encoder_hidden} per direction "
        f"× {m.encoder_layers} layer(s), GRU decoder {m.decoder_hidden}, attention `{m.attention}` "
        f"(window `{m.attention_window}`, input feeding {m.input_feeding}); SentencePiece "
        f"{config.tokenizer.model_type} {config.tokenizer.src_vocab_size}/{config.tokenizer.tgt_vocab_size}.",
    ]
    if report:
        lines.append(
            f"- **Data**: `{report['input_path']}` (sha256 {report['input_sha256'][:16]}…): {report['pairs_kept']:,} pairs "
            f"kept; split by source sentence into train/dev/test = "
            + " / ".join(f"{report['split_pairs'][s]:,} pairs ({report['split_sources'][s]:,} sources)" for s in ("train", "dev", "test"))
            + "."
        )
    lines.append(
        f"- **Training**: {progress.get('epoch', '?')} epoch(s), {progress.get('step', '?')} steps, "
        f"{progress.get('train_seconds', 0):.0f} s of training; best dev BLEU {progress.get('best_bleu', float('nan')):.2f} "
        f"(greedy) at epoch {progress.get('best_epoch', '?')}; hardware: {payload.get('hardware', 'not recorded')}."
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


def export_model(run_dir: Path, out_dir: Path, checkpoint: str = "best") -> Path:
    """Write a model package for ``run_dir``'s ``checkpoint`` into ``out_dir`` (which must not exist)."""
    from safetensors.torch import save_file

    if out_dir.exists() and any(out_dir.iterdir()):
        raise NmtError(f"{out_dir} exists and is not empty: choose a new folder for the model package.")
    config = load_run_config(run_dir)
    paths = prepared_paths(config)
    spm = {"src": paths.spm("src"), "tgt": paths.spm("tgt")}
    hashes = {side: sha256_file(path) for side, path in spm.items()}
    source = checkpoint_path(config, checkpoint)
    payload = load_checkpoint(source)
    check_compatible(payload, config, hashes, source)
    weights = {name: tensor.contiguous() for name, tensor in payload["model"].items()}
    parameters = sum(t.numel() for t in weights.values())
    report = load_report(paths) if paths.report.is_file() else None
    eval_path = run_dir / "eval" / "test.report.json"
    scores = json.loads(eval_path.read_text(encoding="utf-8")) if eval_path.is_file() else None

    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        save_file(weights, str(staging / WEIGHTS))
        packaged = config_from_dict({**config.to_dict(), "run_dir": str(out_dir)})
        packaged.data.prepared_dir = str(out_dir)
        save_config(packaged, staging / "config.yaml")
        for side, path in spm.items():
            shutil.copyfile(path, staging / path.name)
        manifest = {"format": PACKAGE_FORMAT, "spm_sha256": hashes, "exported_from": str(source)}
        write_text_atomic(staging / "manifest.json", json.dumps(manifest, indent=2))
        write_text_atomic(staging / "MODEL_CARD.md", _model_card(config, payload, parameters, report, scores))
        if out_dir.exists():
            out_dir.rmdir()
        staging.rename(out_dir)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    return out_dir


def load_package(model_dir: Path, device: torch.device) -> tuple[Config, Seq2Seq, Tokenizer, Tokenizer]:
    """(config, model, source tokenizer, target tokenizer) from a model package, its
    SentencePiece models checked against the hashes the weights were exported with."""
    from safetensors.torch import load_file

    manifest_path = model_dir / "manifest.json"
    if not manifest_path.is_file():
        raise NmtError(f"{model_dir} is not a model package (no manifest.json): make one with `nmt export`.")
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    if manifest.get("format") != PACKAGE_FORMAT:
        raise NmtError(f"{model_dir} is a model package of format {manifest.get('format')}; this nmt reads {PACKAGE_FORMAT}.")
    config = load_run_config(model_dir)
    config.run_dir = str(model_dir)
    config.data.prepared_dir = str(model_dir)  # the package may have been moved
    paths = prepared_paths(config)
    tokenizers = {side: Tokenizer(paths.spm(side)) for side in ("src", "tgt")}
    for side, tokenizer in tokenizers.items():
        if tokenizer.sha256 != manifest["spm_sha256"][side]:
            raise NmtError(f"{tokenizer.path} does not match the SentencePiece model the weights were trained with.")
    model = Seq2Seq(config.model, tokenizers["src"].vocab_size, tokenizers["tgt"].vocab_size)
    model.load_state_dict(load_file(str(model_dir / WEIGHTS)))
    return config, model.to(device).eval(), tokenizers["src"], tokenizers["tgt"]
