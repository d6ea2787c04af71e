"""From files to a model that translates: a run's checkpoint(s), or model package(s) from
``nmt export``, become a ``LoadedModel`` — config, model (one ``Seq2Seq``, or an
``Ensemble`` of several), tokenizers — after the compatibility and hash checks.

Translation, evaluation, export, resuming training and the server load through here;
nothing loads a checkpoint or a package any other way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import yaml

from nmt.checkpoint import check_compatible, load_checkpoint, translation_weights, upgrade_weight_names
from nmt.config import Config, config_from_dict
from nmt.errors import NmtError
from nmt.model.ensemble import Ensemble
from nmt.model.seq2seq import Seq2Seq
from nmt.paths import CHECKPOINT_NAMES, PackagePaths, RunPaths, prepared_paths, run_paths
from nmt.search import SearchModel
from nmt.tokenizer import Tokenizer

PACKAGE_FORMAT = 1


@dataclass
class LoadedModel:
    config: Config
    model: SearchModel  # a Seq2Seq, or an Ensemble of several, in eval mode on ``device``
    src_tok: Tokenizer
    tgt_tok: Tokenizer
    device: torch.device
    parent: dict | None = None  # the model it was trained from (init_from): name, pair, sha256, test BLEU
    engine: str = "torch"  # what runs the model: torch, or onnx (a package's ONNX graphs on onnxruntime)

    @property
    def parameters(self) -> int:
        """The model's parameter count (an ensemble's: all members')."""
        if self.engine == "onnx":
            return self.model.parameters
        return sum(p.numel() for p in self.model.parameters())


def load_tokenizers(config: Config) -> tuple[Tokenizer, Tokenizer]:
    """The prepared SentencePiece models of ``config`` (source, target)."""
    paths = prepared_paths(config)
    return Tokenizer(paths.spm("src")), Tokenizer(paths.spm("tgt"))


def spm_hashes(src_tok: Tokenizer, tgt_tok: Tokenizer) -> dict[str, str]:
    """What a checkpoint records of its vocabularies, and is checked against on load."""
    return {"src": src_tok.sha256, "tgt": tgt_tok.sha256}


def new_model(config: Config, src_tok: Tokenizer, tgt_tok: Tokenizer) -> Seq2Seq:
    return Seq2Seq(config.model, src_tok.vocab_size, tgt_tok.vocab_size, joint_vocabulary=config.tokenizer.joint)


def load_run_config(run_dir: Path) -> Config:
    """The resolved config a run (or a package) saved as config.yaml."""
    path = RunPaths(run_dir).config
    if not path.is_file():
        raise NmtError(f"{path} not found: is {run_dir} a run directory (written by `nmt train`)?")
    with open(path, encoding="utf-8") as handle:
        return config_from_dict(yaml.safe_load(handle))


def load_checked_checkpoint(config: Config, name: str, src_tok: Tokenizer, tgt_tok: Tokenizer) -> dict[str, Any]:
    """The payload of checkpoint ``name`` (best, last or a path), refused if its model
    settings or SentencePiece models differ from ``config``'s."""
    path = run_paths(config).checkpoint(name)
    payload = load_checkpoint(path)
    check_compatible(payload, config, spm_hashes(src_tok, tgt_tok), path)
    return payload


def load_checkpoints(config: Config, names: list[str], device: torch.device) -> LoadedModel:
    """One checkpoint, or several (an ensemble) trained with this config; a run of several
    members (train.members) gives each member's checkpoint of each name."""
    if config.train.members > 1:
        run = run_paths(config)
        members = range(1, config.train.members + 1)
        names = [str(run.member(k).checkpoint(name)) if name in CHECKPOINT_NAMES else name
                 for name in names for k in members]  # fmt: skip
    src_tok, tgt_tok = load_tokenizers(config)
    models, parent = [], None
    for name in names:
        model = new_model(config, src_tok, tgt_tok)
        payload = load_checked_checkpoint(config, name, src_tok, tgt_tok)
        model.load_state_dict(translation_weights(payload))
        models.append(model)
        parent = parent or payload.get("parent")
    return LoadedModel(config, _one_or_ensemble(models, device), src_tok, tgt_tok, device, parent)


ENGINES = ("torch", "onnx")


def check_engine(engine: str) -> None:
    """Refuse an engine that is not one of ``ENGINES``, naming them."""
    if engine not in ENGINES:
        raise NmtError(f"--engine {engine!r}: one of {', '.join(ENGINES)}.")


def load_packages(model_dirs: list[Path], device: torch.device, engine: str = "torch") -> LoadedModel:
    """Folders written by `nmt export` (the config is the first's); several make an
    ensemble and must share their SentencePiece models. ``engine`` onnx runs one package's
    ONNX graphs (``nmt export --onnx``) on onnxruntime, on the CPU."""
    check_engine(engine)
    if engine == "onnx":
        return _load_onnx_package(model_dirs)
    loaded = [load_package(model_dir) for model_dir in model_dirs]
    config, _, src_tok, tgt_tok = loaded[0]
    parent = json.loads(PackagePaths(model_dirs[0]).manifest.read_text(encoding="utf-8")).get("parent")
    for model_dir, (_, _, other_src, other_tgt) in zip(model_dirs[1:], loaded[1:]):
        if spm_hashes(other_src, other_tgt) != spm_hashes(src_tok, tgt_tok):
            raise NmtError(
                f"{model_dir} uses other SentencePiece models than {model_dirs[0]}: they cannot be ensembled."
            )
    models = _one_or_ensemble([model for _, model, _, _ in loaded], device)
    return LoadedModel(config, models, src_tok, tgt_tok, device, parent)


def _load_onnx_package(model_dirs: list[Path]) -> LoadedModel:
    from nmt.onnx_engine import OnnxModel

    if len(model_dirs) != 1:
        raise NmtError("--engine onnx runs one package; an ensemble of packages runs on --engine torch.")
    config, src_tok, tgt_tok, manifest = package_parts(model_dirs[0])
    model = OnnxModel(model_dirs[0], config, parameters=manifest.get("parameters", 0))
    return LoadedModel(config, model, src_tok, tgt_tok, torch.device("cpu"), manifest.get("parent"), engine="onnx")


def load_package(model_dir: Path) -> tuple[Config, Seq2Seq, Tokenizer, Tokenizer]:
    """A package's config, model and tokenizers, its SentencePiece models checked against
    the hashes the weights were exported with."""
    from safetensors.torch import load_file

    config, src_tok, tgt_tok, _ = package_parts(model_dir)
    model = new_model(config, src_tok, tgt_tok)
    model.load_state_dict(upgrade_weight_names(load_file(str(PackagePaths(model_dir).weights))))
    return config, model, src_tok, tgt_tok


def package_parts(model_dir: Path) -> tuple[Config, Tokenizer, Tokenizer, dict]:
    """A package's config, tokenizers (checked against the hashes the weights were exported
    with) and manifest."""
    package = PackagePaths(model_dir)
    if not package.manifest.is_file():
        raise NmtError(f"{model_dir} is not a model package (no manifest.json): make one with `nmt export`.")
    manifest = json.loads(package.manifest.read_text(encoding="utf-8"))
    if manifest.get("format") != PACKAGE_FORMAT:
        raise NmtError(
            f"{model_dir} is a model package of format {manifest.get('format')}; this nmt reads {PACKAGE_FORMAT}."
        )
    config = load_run_config(model_dir)
    config.run_dir = str(model_dir)
    config.data.prepared_dir = str(model_dir)  # the package may have been moved
    src_tok, tgt_tok = load_tokenizers(config)
    for side, tokenizer in (("src", src_tok), ("tgt", tgt_tok)):
        if tokenizer.sha256 != manifest["spm_sha256"][side]:
            raise NmtError(f"{tokenizer.path} does not match the SentencePiece model the weights were trained with.")
    return config, src_tok, tgt_tok, manifest


def load_trained(path: Path, device: torch.device) -> LoadedModel:
    """A run directory (its best checkpoint) or a model package, whichever ``path`` is."""
    path = Path(path)
    if PackagePaths(path).manifest.is_file():
        return load_packages([path], device)
    if not RunPaths(path).config.is_file():
        raise NmtError(
            f"{path} is neither a run directory (config.yaml and checkpoints/best.pt) nor a model package "
            "(manifest.json, from `nmt export`)."
        )
    config = load_run_config(path)
    config.run_dir = str(path)  # the run may have been moved
    return load_checkpoints(config, ["best"], device)


def trained_weights_files(path: Path) -> list[Path]:
    """The files holding the weights ``load_trained`` reads (what a fingerprint hashes)."""
    path = Path(path)
    if PackagePaths(path).manifest.is_file():
        return [PackagePaths(path).weights]
    if RunPaths(path).config.is_file():
        config = load_run_config(path)
        if config.train.members > 1:
            return [RunPaths(path).member(k).checkpoint("best") for k in range(1, config.train.members + 1)]
    return [RunPaths(path).checkpoint("best")]


def _one_or_ensemble(models: list[Seq2Seq], device: torch.device) -> SearchModel:
    model = models[0] if len(models) == 1 else Ensemble(models)
    return model.to(device).eval()
