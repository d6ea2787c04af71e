"""The checkpoint file format: atomic save and rotation, safe load (``weights_only=True``),
compatibility checks, averaging.

A checkpoint is a plain dict of tensors, numbers, strings, lists and dicts; nothing in it
is a pickled object, so loading one never runs code. A training checkpoint holds ``model``,
``optimizer``, ``scheduler``, ``progress``, ``rng``, ``config``, ``spm_sha256`` and
``hardware``; an averaged one only what translation needs.
"""

from __future__ import annotations

import errno
import os
import pickle
import re
import shutil
from pathlib import Path
from typing import Any

import torch

from nmt.config.parsing import model_from_dict
from nmt.config.paths import RunPaths
from nmt.config.schema import Config, ModelConfig
from nmt.core.errors import NmtError, relative_to_here
from nmt.core.fileio import save_atomic

FORMAT_VERSION = 1


def save_checkpoint(path: str | Path, payload: dict[str, Any]) -> None:
    """Write ``payload`` to a temp file, fsync, rename: a kill never leaves half a checkpoint, and
    a full disk a clear error with the checkpoints before it intact."""
    try:
        save_atomic(path, lambda tmp: torch.save({"format_version": FORMAT_VERSION, **payload}, tmp))
    except (OSError, RuntimeError) as error:  # torch.save reports a failed write as a RuntimeError
        reason = "the disk is full" if _disk_full(error) else f"{type(error).__name__}: {str(error).splitlines()[0]}"
        raise NmtError(
            f"Could not write the checkpoint {path} ({reason}). The checkpoints written before it are intact: "
            "free some space (or move run_dir) and resume with --resume."
        ) from None


def _disk_full(error: BaseException) -> bool:
    return (isinstance(error, OSError) and error.errno == errno.ENOSPC) or "No space left" in str(error)


def translation_weights(payload: dict[str, Any]) -> dict[str, torch.Tensor]:
    """The weights a checkpoint translates with: its model's, or its weight average's when that
    validated better (``train.ema_decay``; ``model`` then holds the weights training goes on with)."""
    return payload["ema"] if payload.get("translate_with") == "ema" else payload["model"]


def _point(link: Path, target: Path) -> None:
    """Make ``link`` an atomic hard link to ``target`` (a copy where links are not supported)."""
    tmp = link.with_name(f".{link.name}.tmp")
    tmp.unlink(missing_ok=True)
    try:
        os.link(target, tmp)
    except OSError:
        shutil.copyfile(target, tmp)
    os.replace(tmp, link)


def training_checkpoint(
    *,
    model: dict[str, torch.Tensor],
    optimizer: dict[str, Any],
    progress: dict[str, Any],
    rng: dict | list[dict],
    config: dict[str, Any],
    spm_sha256: dict[str, str],
    hardware: str,
    scaler: dict[str, Any] | None = None,
    parent: dict | None = None,
    ema: dict[str, torch.Tensor] | None = None,
    translate_with: str = "model",
    threads: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """What a training checkpoint holds: everything resuming needs (weights, optimizer, the run's
    position, every rank's random state), what loading checks (the config, the SentencePiece
    hashes) and what a reader is told (hardware, parent). With an EMA of the weights, both sets
    and which of them translates (``translate_with``: "ema" or "model"). With ``train.threads: auto``,
    the thread tuner's state (``threads``): a resumed run goes on with the counts it had."""
    payload: dict[str, Any] = {
        "hardware": hardware,
        "model": model,
        "optimizer": optimizer,
        "progress": progress,
        "rng": rng,
        "config": config,
        "spm_sha256": spm_sha256,
    }
    if scaler is not None:
        payload["scaler"] = scaler
    if parent is not None:
        payload["parent"] = parent
    if ema is not None:
        payload["ema"] = ema
        payload["translate_with"] = translate_with
    if threads is not None:
        payload["threads"] = threads
    return payload


def save_training_checkpoint(run: RunPaths, payload: dict[str, Any], step: int, keep: int, best: bool = False) -> Path:
    """Write ``step-<N>.pt`` atomically, point ``last.pt`` (and ``best.pt`` if ``best``) at it,
    and delete step checkpoints beyond the newest ``keep``."""
    path = run.step_checkpoint(step)
    run.writable(path)
    save_checkpoint(path, payload)
    _point(run.checkpoint("last"), path)
    if best:
        _point(run.checkpoint("best"), path)
    for old in run.step_checkpoints()[:-keep]:
        old.unlink()
    return path


# How torch.load(weights_only=True) names a pickled global it refuses, across releases:
# "Unsupported global: GLOBAL os.system" and "unsupported GLOBAL posix.system whose module posix is blocked"
UNSUPPORTED_GLOBAL = re.compile(r"unsupported(?: global:)? GLOBAL (\S+)", re.IGNORECASE)


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        relative = relative_to_here(path)
        raise NmtError(
            f"Checkpoint not found: {path}{relative}."
            + ("" if relative else " Train first (`nmt train`) or pass --checkpoint PATH.")
        )
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        found = UNSUPPORTED_GLOBAL.search(str(exc))
        if found is None:
            raise NmtError(f"Cannot read checkpoint {path}: it is damaged or not a PyTorch file.") from None
        raise NmtError(
            f"Refusing to load {path}: it contains a pickled object ({found.group(1)}), which could run code "
            "when loaded. nmt checkpoints hold only tensors and plain values."
        ) from None
    except (RuntimeError, EOFError, OSError) as exc:
        raise NmtError(f"Cannot read checkpoint {path}: {exc}") from None
    except Exception as exc:  # the unpickler's own, on bytes that are no pickle at all (IndexError, ...)
        raise NmtError(f"Cannot read checkpoint {path}: it is damaged ({type(exc).__name__}).") from None
    if not isinstance(payload, dict) or payload.get("format_version") != FORMAT_VERSION:
        raise NmtError(f"{path} is not an nmt checkpoint (format version {FORMAT_VERSION}).")
    for key in ("model", "ema"):
        if key in payload:
            payload[key] = upgrade_weight_names(payload[key])
    return payload


# Bahdanau decoders written before the decoders shared one cell class held an nn.GRUCell,
# whose parameters have no layer suffix: decoder.rnn.weight_ih is now decoder.rnn.weight_ih_l0.
_CELL_NAME = re.compile(r"^(decoder\.rnn\.(?:weight|bias)_(?:ih|hh))$")


def upgrade_weight_names(weights: dict[str, Any]) -> dict[str, Any]:
    """Weights saved under an older layout, renamed to today's (the values are untouched)."""
    return {_CELL_NAME.sub(r"\1_l0", name): tensor for name, tensor in weights.items()}


def model_differences(saved: dict, current: ModelConfig, prefix: str, holder: str = "checkpoint has") -> list[str]:
    """Each key ``current``'s family reads (beyond its ``free_keys``: the weights mean the same
    under any value) where ``saved`` (the weights' own record, as ``holder`` says) and ``current``
    (a config's) differ, as a line naming the key. A record of any version reads: a key it lacks
    (added since) takes its default, what it was trained with; another family's keys are not read."""
    ours = current.keys()
    if saved.get("arch", ModelConfig.arch) != current.arch:  # another family: the other keys mean nothing here
        return [f"{prefix}arch: {holder} {saved.get('arch', ModelConfig.arch)!r}, config has {current.arch!r}"]
    defaults = type(current)().keys()
    return [
        f"{prefix}{k}: {holder} {saved.get(k, defaults[k])!r}, config has {ours[k]!r}"
        for k in sorted(ours)
        if k not in current.free_keys and saved.get(k, defaults[k]) != ours[k]
    ]


def check_compatible(payload: dict, config: Config, spm_sha256: dict[str, str], path: str | Path) -> None:
    """Refuse a checkpoint whose model settings or SentencePiece models differ from ours."""
    problems = model_differences(payload["config"]["model"], config.model, "model.")
    for side in ("src", "tgt"):
        if payload["spm_sha256"][side] != spm_sha256[side]:
            problems.append(
                f"{side} SentencePiece model: checkpoint was trained with sha256 {payload['spm_sha256'][side][:12]}…, "
                f"the prepared one is {spm_sha256[side][:12]}… (a different vocabulary)"
            )
    if problems:
        raise NmtError(
            f"Checkpoint {path} does not match the config:\n  "
            + "\n  ".join(problems)
            + "\nUse the config and prepared data it was trained with, or train a new model."
        )


def average_checkpoints(paths: list[Path]) -> dict[str, Any]:
    """A checkpoint whose model weights are the mean of ``paths``' (float tensors; others
    from the newest). Config and SentencePiece hashes must agree; optimizer state is dropped."""
    payloads = [load_checkpoint(path) for path in paths]
    newest = payloads[-1]
    newest_model = model_from_dict(newest["config"]["model"])
    for path, payload in zip(paths, payloads):
        if payload["spm_sha256"] != newest["spm_sha256"] or model_differences(
            payload["config"]["model"], newest_model, ""
        ):
            raise NmtError(
                f"{path} was trained with another model config or vocabulary than {paths[-1]}: cannot average."
            )
    averaged = {}
    weights = [translation_weights(payload) for payload in payloads]
    for name, tensor in weights[-1].items():
        if tensor.is_floating_point():
            averaged[name] = torch.stack([w[name].float() for w in weights]).mean(0).to(tensor.dtype)
        else:
            averaged[name] = tensor
    return {
        "model": averaged,
        "config": newest["config"],
        "spm_sha256": newest["spm_sha256"],
        "progress": newest["progress"],
        "averaged_from": [str(path) for path in paths],
    }


def average_newest(run: RunPaths, count: int, output: Path) -> list[Path]:
    """Average the weights of ``run``'s newest ``count`` step checkpoints into ``output`` (what
    `nmt average` does); the checkpoints averaged, oldest first."""
    available = run.step_checkpoints()
    if len(available) < count:
        raise NmtError(
            f"{run.checkpoints} holds {len(available)} step checkpoint(s); averaging the newest {count} needs {count}. "
            "Keep more with train.keep_checkpoints (and train.checkpoint_every for checkpoints inside epochs)."
        )
    chosen = available[-count:]
    save_checkpoint(output, average_checkpoints(chosen))
    return chosen
