"""From files to a model that translates: a run's checkpoint(s), or model package(s) from
``nmt export``, become a ``LoadedModel`` — config, model (one ``TranslationModel``, or an
``Ensemble`` of several), tokenizers — after the compatibility and hash checks.

Translation, evaluation, export, resuming training and the server load through here;
nothing loads a checkpoint or a package any other way.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import yaml

from nmt.config.parsing import config_from_dict
from nmt.config.paths import CHECKPOINT_NAMES, PackagePaths, RunPaths, prepared_paths, run_paths
from nmt.config.schema import Config
from nmt.core.device import skip_cudnn_attention
from nmt.core.errors import NmtError
from nmt.core.fileio import refuse_link, sha256_file
from nmt.core.hardware import available_memory
from nmt.core.plugins import missing_plugins
from nmt.core.registry import ENGINES
from nmt.data.tokenizer import Tokenizer
from nmt.decoding.search import SearchModel
from nmt.model.base import TranslationModel, build_model
from nmt.model.ensemble import Ensemble
from nmt.runtime.checkpoint import (
    check_compatible,
    load_checkpoint,
    model_differences,
    translation_weights,
    upgrade_weight_names,
)
from nmt.runtime.package_files import check_file

PACKAGE_FORMAT = 1


@dataclass
class LoadedModel:
    config: Config
    model: SearchModel  # a TranslationModel, or an Ensemble of several, in eval mode on ``device``
    src_tok: Tokenizer
    tgt_tok: Tokenizer
    device: torch.device
    parent: dict | None = None  # the model it was trained from (init_from): name, pair, sha256, test BLEU
    engine: str = "torch"  # what runs the model: torch, or onnx (a package's ONNX graphs on onnxruntime)

    def __post_init__(self) -> None:
        # search starts each translation with the target's language code, if it has one; an ensemble
        # or another engine's model is told here (a new torch model is told as it is built: new_model)
        setattr(self.model, "target_start", tuple(self.tgt_tok.code_ids))  # noqa: B010 - not every engine declares it

    @property
    def parameters(self) -> int:
        """The model's parameter count (an ensemble's: all members'; another engine's, as it counts them)."""
        if isinstance(self.model, torch.nn.Module):
            return sum(p.numel() for p in self.model.parameters())
        return int(getattr(self.model, "parameter_count", 0))


@dataclass(frozen=True)
class Engine:
    """What runs a model package (``--engine NAME``; the ``ENGINES`` registry): ``load`` reads
    packages into a model that translates, ``ensembles`` says whether it takes several at once.
    Checkpoints always run on torch."""

    load: Callable[[list[Path], torch.device], LoadedModel]
    ensembles: bool = False
    describe: str = ""


def load_tokenizers(config: Config, where: Callable[[Path], Path] = Path) -> tuple[Tokenizer, Tokenizer]:
    """The prepared SentencePiece models of ``config`` (source, target), each with its side's
    language code; ``where``: the place each path is read from (an import's staging folder)."""
    paths, tok = prepared_paths(config), config.tokenizer
    return (
        Tokenizer(where(paths.spm("src")), tok.src_code, "tokenizer.src_code"),
        Tokenizer(where(paths.spm("tgt")), tok.tgt_code, "tokenizer.tgt_code"),
    )


def spm_hashes(src_tok: Tokenizer, tgt_tok: Tokenizer) -> dict[str, str]:
    """What a checkpoint records of its vocabularies, and is checked against on load."""
    return {"src": src_tok.sha256, "tgt": tgt_tok.sha256}


# bytes a parameter costs while training in float32: itself, its gradient, Adam's two moments
TRAINING_BYTES_PER_PARAMETER = 16
# the model's KEYS that size it, named when it is refused for its size
SIZE_KEYS = ("embed_dim", "ff_dim", "encoder_hidden", "decoder_hidden", "encoder_layers", "decoder_layers")


def parameter_count(config: Config, src_tok: Tokenizer, tgt_tok: Tokenizer) -> int:
    """The parameters ``config``'s model would have, counted on the ``meta`` device (nothing allocated)."""
    # the random state forked: a dispatch mode (the simulated CUDA tier's) may run meta initialisers on the host
    with torch.random.fork_rng(devices=[]), torch.device("meta"):
        return sum(p.numel() for p in new_model(config, src_tok, tgt_tok).parameters())


def check_trainable(config: Config, src_tok: Tokenizer, tgt_tok: Tokenizer, device: torch.device) -> int:
    """The model's parameters, refused before anything is allocated when training them (weights,
    gradients, Adam's moments: ``TRAINING_BYTES_PER_PARAMETER`` each) could not fit in what
    ``device`` has free: a clear figure, not an allocator's traceback minutes later."""
    parameters = parameter_count(config, src_tok, tgt_tok)
    needed = parameters * TRAINING_BYTES_PER_PARAMETER
    free = available_memory(device)
    if free is not None and needed > free:
        model = config.model
        sizes = ", ".join(f"model.{key}: {getattr(model, key)}" for key in SIZE_KEYS if hasattr(model, key))
        raise NmtError(
            f"This model has {parameters / 1e6:,.1f} M parameters: training it needs about {needed / 2**30:,.1f} GiB "
            f"(weights, gradients and Adam's two moments, {TRAINING_BYTES_PER_PARAMETER} bytes a parameter, before "
            f"activations) and {device.type} has {free / 2**30:,.1f} GiB free. Make it smaller ({sizes}) or the "
            "vocabularies (tokenizer.src_vocab_size, tokenizer.tgt_vocab_size)."
        )
    return parameters


def new_model(config: Config, src_tok: Tokenizer, tgt_tok: Tokenizer) -> TranslationModel:
    """A new model of ``config``'s family, sized for these tokenizers; search starts each of
    its translations with the target's language code, if it has one (``target_start``)."""
    model = build_model(config.model, src_tok.vocab_size, tgt_tok.vocab_size, joint_vocabulary=config.tokenizer.joint)
    model.target_start = tuple(tgt_tok.code_ids)
    return model


def load_run_config(run_dir: Path, shared: bool = False) -> Config:
    """The resolved config a run (or a package) saved as config.yaml, as it was written: its
    ``run_dir`` names where it was trained (``load_run`` places it where the folder is now). A
    ``shared`` one (a model package) may not import code: the plugins it names must be loaded
    already (``--plugin``), where a run of one's own imports its plugins itself."""
    path = RunPaths(run_dir).config
    if not path.is_file():
        raise NmtError(f"{path} not found: is {run_dir} a run directory (written by `nmt train`)?")
    refuse_link(path)
    try:
        with open(path, encoding="utf-8") as handle:
            raw = yaml.safe_load(handle)
    except (yaml.YAMLError, UnicodeDecodeError) as error:
        raise NmtError(f"{path} is not a readable config (YAML): {error}") from None
    if not isinstance(raw, dict):
        raise NmtError(f"{path} must hold a mapping of config sections, got {type(raw).__name__}.")
    missing = missing_plugins(raw["plugins"] if isinstance(raw.get("plugins"), list) else [])
    if shared and missing:
        raise NmtError(
            f"{path} needs the plugin(s) {', '.join(map(str, missing))}, which are code: install "
            f"them if you trust them and pass --plugin {' --plugin '.join(map(str, missing))}."
        )
    try:
        return config_from_dict(raw, trained=True)
    except NmtError as error:
        raise NmtError(f"{path}: {error}") from None


def load_run(run_dir: Path, shared: bool = False) -> Config:
    """A run directory's config, with ``run_dir`` the folder given: a run that was copied, moved or
    downloaded reads its own checkpoints and tokenizers, never those of the place it was trained
    (the same relative ``runs/<name>`` may hold another model on this machine)."""
    config = load_run_config(run_dir, shared)
    config.run_dir = str(run_dir)
    return config


def load_checked_checkpoint(config: Config, name: str, src_tok: Tokenizer, tgt_tok: Tokenizer) -> dict[str, Any]:
    """The payload of checkpoint ``name`` (best, last or a path), refused if its model
    settings or SentencePiece models differ from ``config``'s."""
    path = run_paths(config).checkpoint(name)
    payload = load_checkpoint(path)
    check_compatible(payload, config, spm_hashes(src_tok, tgt_tok), path)
    return payload


def weights_shapes(weights: dict[str, torch.Tensor]) -> dict[str, tuple[int, ...]]:
    return {name: tuple(tensor.shape) for name, tensor in weights.items()}


# safetensors' names of the dtypes a model's tensors have
SAFETENSORS_DTYPES = {
    torch.float32: "F32",
    torch.float16: "F16",
    torch.bfloat16: "BF16",
    torch.float64: "F64",
    torch.int64: "I64",
    torch.int32: "I32",
    torch.bool: "BOOL",
}
MODEL_METADATA = "nmt.model"  # the weights file's record of the model settings they were exported with


def weights_metadata(config: Config) -> dict[str, str]:
    """What a package's weights file records of its model: every model setting, so that a
    config.yaml edited beside them (heads, tied embeddings: keys no shape shows) is refused."""
    return {MODEL_METADATA: json.dumps(config.to_dict()["model"], sort_keys=True)}


def check_package_settings(config: Config, metadata: dict[str, str] | None, source: Path) -> None:
    """Refuse a package whose config.yaml describes another model than its weights were exported
    with (a package written before the weights recorded it is read as it is)."""
    recorded = (metadata or {}).get(MODEL_METADATA)
    if recorded is None:
        return
    try:
        saved = json.loads(recorded)
    except ValueError:
        raise NmtError(f"{source}: its record of the model settings is not JSON. Export the model again.") from None
    problems = model_differences(saved, config.model, "model.", holder="the weights were exported with")
    if problems:
        raise NmtError(
            f"{source.parent / 'config.yaml'} does not describe the model its weights hold:\n  "
            + "\n  ".join(problems)
            + "\nPut the settings back, or export the model again from its run."
        )


def check_weights_fit(
    config: Config,
    src_tok: Tokenizer,
    tgt_tok: Tokenizer,
    shapes: dict[str, tuple[int, ...]],
    source: Path,
    dtypes: dict[str, str] | None = None,
) -> None:
    """Refuse ``config`` unless the model it describes has exactly the tensors ``shapes`` (the
    weights' own), and (``dtypes``: a safetensors header's) of the types it takes. The model is
    built on the ``meta`` device, which allocates nothing, so memory stays bounded by the
    weights' size whatever a shared config.yaml says."""
    with torch.random.fork_rng(devices=[]), torch.device("meta"):  # as parameter_count
        state = new_model(config, src_tok, tgt_tok).state_dict()
    expected = weights_shapes(state)
    problems = [f"{name}: missing" for name in sorted(set(expected) - set(shapes))]
    problems += [f"{name}: not part of this model" for name in sorted(set(shapes) - set(expected))]
    problems += [
        f"{name}: the weights are {list(shapes[name])}, the config makes {list(shape)}"
        for name, shape in sorted(expected.items())
        if name in shapes and shapes[name] != shape
    ]
    problems += [
        f"{name}: stored as {dtypes[name]}, the model takes {SAFETENSORS_DTYPES.get(tensor.dtype, tensor.dtype)}"
        for name, tensor in sorted(state.items())
        if dtypes is not None and name in dtypes and dtypes[name] != SAFETENSORS_DTYPES.get(tensor.dtype)
    ]
    if problems:
        listed = "\n  ".join(problems[:8]) + (f"\n  ... and {len(problems) - 8} more" if len(problems) > 8 else "")
        raise NmtError(f"{source} does not hold the model its config describes:\n  {listed}")


def model_for_weights(
    config: Config,
    src_tok: Tokenizer,
    tgt_tok: Tokenizer,
    shapes: dict[str, tuple[int, ...]],
    source: Path,
    dtypes: dict[str, str] | None = None,
) -> TranslationModel:
    """A new model of ``config``, built only once ``check_weights_fit`` has found it holds ``shapes``."""
    check_weights_fit(config, src_tok, tgt_tok, shapes, source, dtypes)
    return new_model(config, src_tok, tgt_tok)


def load_checkpoints(config: Config, names: list[str], device: torch.device) -> LoadedModel:
    """One checkpoint, or several (an ensemble) trained with this config; a run of several
    members (train.members) gives each member's checkpoint of each name."""
    if config.train.members > 1:
        run = run_paths(config)
        members = range(1, config.train.members + 1)
        names = [
            str(run.member(k).checkpoint(name)) if name in CHECKPOINT_NAMES else name for name in names for k in members
        ]
    src_tok, tgt_tok = load_tokenizers(config)
    models, parent = [], None
    for name in names:
        payload = load_checked_checkpoint(config, name, src_tok, tgt_tok)
        weights = translation_weights(payload)
        model = model_for_weights(config, src_tok, tgt_tok, weights_shapes(weights), run_paths(config).checkpoint(name))
        model.load_state_dict(weights)
        models.append(model)
        parent = parent or payload.get("parent")
    return LoadedModel(config, _one_or_ensemble(models, device), src_tok, tgt_tok, device, parent)


def check_engine(engine: str) -> Engine:
    """The registered engine ``engine`` names, or an error naming the ones there are."""
    if engine not in ENGINES:
        raise NmtError(f"--engine {engine!r}: one of {', '.join(ENGINES)}.")
    return ENGINES[engine]


def load_packages(model_dirs: list[Path], device: torch.device, engine: str = "torch") -> LoadedModel:
    """Folders written by `nmt export` (the config is the first's), run by ``engine``: torch
    here, onnx (``nmt export --onnx``, on onnxruntime) in nmt/runtime/onnx_engine.py, or a
    plugin's. Several make an ensemble, where the engine runs one."""
    chosen = check_engine(engine)
    if len(model_dirs) > 1 and not chosen.ensembles:
        raise NmtError(f"--engine {engine} runs one package; an ensemble of packages runs on --engine torch.")
    loaded = chosen.load(model_dirs, device)
    loaded.engine = engine
    return loaded


def load_torch_packages(model_dirs: list[Path], device: torch.device) -> LoadedModel:
    """Packages run by PyTorch on ``device``; several make an ensemble and must share their
    SentencePiece models."""
    loaded = [load_package(model_dir) for model_dir in model_dirs]
    config, _, src_tok, tgt_tok = loaded[0]
    parent = read_manifest(PackagePaths(model_dirs[0])).get("parent")
    for model_dir, (_, _, other_src, other_tgt) in zip(model_dirs[1:], loaded[1:]):
        if spm_hashes(other_src, other_tgt) != spm_hashes(src_tok, tgt_tok):
            raise NmtError(
                f"{model_dir} uses other SentencePiece models than {model_dirs[0]}: they cannot be ensembled."
            )
    models = _one_or_ensemble([model for _, model, _, _ in loaded], device)
    return LoadedModel(config, models, src_tok, tgt_tok, device, parent)


ENGINES.register("torch", Engine(load_torch_packages, ensembles=True, describe="PyTorch, on any device"))


def load_package(model_dir: Path) -> tuple[Config, TranslationModel, Tokenizer, Tokenizer]:
    """A package's config, model and tokenizers, its SentencePiece models checked against
    the hashes the weights were exported with. The weights file's header (names and shapes) is
    read first, and the model built only if the config describes exactly those tensors."""
    from safetensors import SafetensorError, safe_open
    from safetensors.torch import load_file

    config, src_tok, tgt_tok, manifest = package_parts(model_dir)
    path = PackagePaths(model_dir).weights
    check_file(Path(model_dir), manifest, path.name)  # the bytes exported, where the manifest records them
    try:
        with safe_open(str(path), framework="pt") as weights_file:
            names = list(weights_file.keys())
            shapes = {name: tuple(weights_file.get_slice(name).get_shape()) for name in names}
            dtypes = {name: weights_file.get_slice(name).get_dtype() for name in names}
        shapes, dtypes = upgrade_weight_names(shapes), upgrade_weight_names(dtypes)
        model = model_for_weights(config, src_tok, tgt_tok, shapes, path, dtypes)
        weights = upgrade_weight_names(load_file(str(path)))
    except (SafetensorError, OSError) as error:
        raise NmtError(f"Cannot read the weights {path}: {error}. Export the model again.") from None
    try:
        model.load_state_dict(weights)
    except RuntimeError as error:  # a dtype the model cannot take (e.g. integers for a float tensor)
        raise NmtError(f"Cannot load the weights {path}: {error}") from None
    return config, model, src_tok, tgt_tok


def read_manifest(package: PackagePaths) -> dict:
    """A package's manifest.json, with the fields loading relies on checked."""
    refuse_link(package.manifest)
    try:
        manifest = json.loads(package.manifest.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as error:
        raise NmtError(f"{package.manifest} is not valid JSON ({error}): export the model again.") from None
    if not isinstance(manifest, dict):
        raise NmtError(f"{package.manifest} must hold a JSON object: export the model again.")
    if manifest.get("format") != PACKAGE_FORMAT:
        raise NmtError(
            f"{package.root} is a model package of format {manifest.get('format')!r}; this nmt reads {PACKAGE_FORMAT}."
        )
    hashes = manifest.get("spm_sha256")
    if not isinstance(hashes, dict) or not all(isinstance(hashes.get(side), str) for side in ("src", "tgt")):
        raise NmtError(
            f"{package.manifest} lacks spm_sha256 (the hashes of the SentencePiece models the weights were trained "
            "with), so its tokenizers cannot be checked: export the model again."
        )
    parent = manifest.get("parent")
    if parent is not None and not isinstance(parent, dict):
        raise NmtError(f"{package.manifest}: parent must be an object or null.")
    return manifest


def package_parts(model_dir: Path) -> tuple[Config, Tokenizer, Tokenizer, dict]:
    """A package's config, tokenizers (checked against the hashes the weights were exported
    with) and manifest."""
    package = PackagePaths(model_dir)
    if not package.manifest.is_file():
        raise NmtError(f"{model_dir} is not a model package (no manifest.json): make one with `nmt export`.")
    manifest = read_manifest(package)
    config = load_run(model_dir, shared=True)
    config.data.prepared_dir = str(model_dir)  # the package may have been moved
    for side in ("src", "tgt"):  # checked before SentencePiece parses them
        spm = prepared_paths(config).spm(side)
        refuse_link(spm)
        if spm.is_file() and sha256_file(spm) != manifest["spm_sha256"][side]:
            raise NmtError(f"{spm} does not match the SentencePiece model the weights were trained with.")
    check_package_settings(config, _weights_header_metadata(package.weights), package.weights)
    src_tok, tgt_tok = load_tokenizers(config)
    return config, src_tok, tgt_tok, manifest


def _weights_header_metadata(path: Path) -> dict[str, str] | None:
    """The metadata of a safetensors file's header (None: no file, or none recorded)."""
    from safetensors import SafetensorError, safe_open

    if not path.is_file():
        return None
    refuse_link(path)
    try:
        with safe_open(str(path), framework="pt") as weights_file:
            return weights_file.metadata()
    except (SafetensorError, OSError) as error:
        raise NmtError(f"Cannot read the weights {path}: {error}. Export the model again.") from None


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
    return load_checkpoints(load_run(path), ["best"], device)


def trained_weights_files(path: Path) -> list[Path]:
    """The files holding the weights ``load_trained`` reads (what a fingerprint hashes)."""
    path = Path(path)
    if PackagePaths(path).manifest.is_file():
        return [PackagePaths(path).weights]
    if RunPaths(path).config.is_file():
        config = load_run(path)
        if config.train.members > 1:
            return [RunPaths(path).member(k).checkpoint("best") for k in range(1, config.train.members + 1)]
    return [RunPaths(path).checkpoint("best")]


def _one_or_ensemble(models: list[TranslationModel], device: torch.device) -> SearchModel:
    model = models[0] if len(models) == 1 else Ensemble(models)
    skip_cudnn_attention(device)  # search meets a new key length at every step
    return model.to(device).eval()
