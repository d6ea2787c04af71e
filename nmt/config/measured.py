"""What the config keys measured here (``nmt/measured.yaml``): each key's effect with the page
that measured it, quoted by the config reference, and the keys removed after they measured as
losses, which a config is refused for with why. Data, not code: a measurement edits the file."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

MEASURED_FILE = Path(__file__).resolve().parents[1] / "measured.yaml"


@dataclass(frozen=True)
class Effect:
    text: str  # what it gave, and where (corpus, budget, seeds)
    page: str  # the docs page that measured it, relative to docs/


@dataclass(frozen=True)
class Removed:
    default: Any  # what every run's saved config.yaml wrote for it
    why: str
    page: str


@functools.cache
def _file() -> dict:
    with open(MEASURED_FILE, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def key_effects() -> dict[str, Effect]:
    """Dotted config key -> its measured effect."""
    return {key: Effect(entry["effect"], entry["page"]) for key, entry in _file()["keys"].items()}


def removed_keys() -> dict[str, Removed]:
    """Dotted config key -> why it was removed."""
    return {key: Removed(entry["default"], entry["why"], entry["page"]) for key, entry in _file()["removed"].items()}
