"""``nmt.prepare``, ``nmt.train`` and ``nmt.timeline``: what ``nmt prepare`` and ``nmt train`` run,
from a config file, a mapping or a ``Config``, with sections to change given as keywords::

    model = nmt.train("configs/tiny.yaml", train={"max_minutes": 2})
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from nmt.api.model import Model, load
from nmt.api.views import View
from nmt.config.files import load_config
from nmt.config.parsing import apply_overrides, config_from_dict
from nmt.config.paths import run_paths
from nmt.config.schema import Config
from nmt.core.device import prepare_device
from nmt.core.errors import NmtError
from nmt.pipelines.prepare import PrepareReport
from nmt.pipelines.prepare import prepare as prepare_data
from nmt.training.callbacks import Callback
from nmt.training.launch import refuse_new_run_over_old
from nmt.training.launch import train as train_models
from nmt.training.timeline import read_timeline_within

ConfigLike = Config | str | Path | dict


def as_config(config: ConfigLike, sections: dict[str, Any]) -> Config:
    """``config`` (a YAML file, a mapping of sections, or a ``Config``) with ``sections`` changed:
    ``train={"max_minutes": 2}`` sets train.max_minutes, ``run_dir="runs/x"`` a top-level key;
    each checked as the config file's own keys are."""
    overrides = [
        f"{section}.{key}={_yaml(value)}" if isinstance(values, dict) else f"{section}={_yaml(values)}"
        for section, values in sections.items()
        for key, value in (values.items() if isinstance(values, dict) else [(None, values)])
    ]
    if isinstance(config, (str, Path)):
        return load_config(config, overrides)
    if not isinstance(config, (Config, dict)):
        raise NmtError(f"A config is a YAML file, a mapping of sections or a Config, got {type(config).__name__}.")
    raw = copy.deepcopy(config.to_dict() if isinstance(config, Config) else config)
    apply_overrides(raw, overrides)
    return config_from_dict(raw)


def _yaml(value: Any) -> str:
    """A value as ``--set`` reads it (YAML, one line)."""
    return yaml.safe_dump(value, default_flow_style=True, width=10**9).strip().removesuffix("\n...").strip()


def init(
    data: str | Path | Sequence[str | Path],
    to: str | Path | None = None,
    minutes: float = 5.0,
    src_lang: str = "",
    tgt_lang: str = "",
    init_from: str = "",
    arch: str = "",
) -> Path:
    """``nmt init``: profile ``data`` (a TSV file or an Anki zip, or two line-aligned files) and
    write the config measured for a corpus of its size (default configs/<name>.yaml); its path,
    for ``nmt.train``."""
    from nmt.pipelines.init import init_config

    files = [Path(data)] if isinstance(data, (str, Path)) else [Path(path) for path in data]
    path, _ = init_config(files, Path(to) if to else None, minutes, src_lang, tgt_lang, init_from, arch)
    return path


def prepare(config: ConfigLike, force: bool = False, **sections: Any) -> PrepareReport:
    """Read, split and tokenize the config's corpus (``nmt prepare``); its report."""
    return prepare_data(as_config(config, sections), force=force)


def train(
    config: ConfigLike,
    resume: bool = False,
    device: str | None = None,
    callbacks: Sequence[Callback] = (),
    **sections: Any,
) -> Model:
    """Prepare the data if needed, train the config's model (``nmt train``: progress in the
    notebook, ``train.max_minutes`` its budget) and load the trained run; ``callbacks`` are told
    of the run (nmt/training/callbacks.py). An interrupt (Ctrl-C, a notebook's Interrupt) leaves a
    checkpoint and raises ``TrainingInterrupted``: ``train(..., resume=True)`` goes on from it."""
    cfg = as_config(config, sections)
    refuse_new_run_over_old(cfg, resume)
    prepare_data(cfg)
    train_models(cfg, prepare_device(device or cfg.train.device), resume=resume, callbacks=callbacks)
    return load(cfg.run_dir)


def timeline(run: str | Path, max_bytes: int = 2_000_000) -> View:
    """The probe sentences' attention at every validation of a run's training (the lab's timeline),
    thinned evenly to ``max_bytes``."""
    path = run_paths(load_config(Path(run) / "config.yaml")).timeline
    if not path.is_file():
        raise NmtError(f"{run} has no attention timeline: it records one with train.probes > 0, at each epoch's end.")
    entries, recorded = read_timeline_within(path, max_bytes)
    return View("timeline", {"entries": entries, "recorded": recorded})


def compare_attentions(
    config: str | Path,
    attentions: Sequence[str] = ("bahdanau", "luong-general", "luong-concat"),
    transformer: bool = False,
    minutes: float = 10.0,
    runs: str | Path | None = None,
    device: str | None = None,
) -> View:
    """``nmt compare``: each attention (and nmt init's Transformer) trained on the config's pairs
    for its share of ``minutes``, scored (BLEU, chrF) and held against eflomal (AER); a view of the
    table, its numbers in ``.data`` (also <runs>/compare.json)."""
    from nmt.pipelines.variants import compare_variants, variants

    cfg = load_config(config)
    found = compare_variants(
        Path(config),
        [],
        variants(list(attentions), transformer),
        minutes,
        Path(runs) if runs else None,
        prepare_device(device or cfg.train.device),
    )
    return View("variants", found)
