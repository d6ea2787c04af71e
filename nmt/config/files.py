"""A config as a YAML file: read (with ``--set`` overrides and the ``--plugin`` names), validated
into a ``Config``, and written back whole (a run's own ``config.yaml``)."""

from __future__ import annotations

from pathlib import Path

import yaml

from nmt.config.parsing import apply_overrides, config_from_dict
from nmt.config.schema import Config
from nmt.core.errors import NmtError
from nmt.core.plugins import requested_plugins


def load_config(path: str | Path, overrides: list[str] | None = None) -> Config:
    """Load, override and validate a YAML config. ``run_dir`` defaults to runs/<file stem>."""
    path = Path(path)
    if not path.is_file():
        raise NmtError(f"Config file not found: {path}")
    try:
        with open(path, encoding="utf-8") as handle:
            raw = yaml.safe_load(handle)
    except yaml.YAMLError as exc:
        raise NmtError(f"Config file {path} is not valid YAML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise NmtError(f"Config file {path} is not UTF-8 text: {exc}") from None
    raw = {} if raw is None else raw
    if not isinstance(raw, dict):
        raise NmtError(f"Config file {path} must hold a mapping of sections, got {type(raw).__name__}.")
    apply_overrides(raw, overrides or [])
    if requested_plugins():  # --plugin: as if the file listed them, so the run's config.yaml keeps them
        listed = raw["plugins"] if isinstance(raw.get("plugins"), list) else []
        raw["plugins"] = listed + [name for name in requested_plugins() if name not in listed]
    config = config_from_dict(raw, default_run_dir=str(Path("runs") / path.stem))
    if is_run_config(path) and Path(config.run_dir).resolve() != path.parent.resolve():
        config.run_dir = str(path.parent)  # a run's own config.yaml: the run is where it is, from any folder
    return config


def is_run_config(path: Path) -> bool:
    """Whether ``path`` is the config.yaml a run saved beside its checkpoints (its own, or its members')."""
    folder = path.parent
    return path.name == "config.yaml" and (
        (folder / "checkpoints").is_dir() or any(folder.glob("member-*/checkpoints"))
    )


def save_config(config: Config, path: str | Path) -> None:
    from nmt.core.fileio import write_text_atomic

    write_text_atomic(path, yaml.safe_dump(config.to_dict(), sort_keys=False, allow_unicode=True))
