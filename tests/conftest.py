"""Shared fixtures: a small synthetic Anki corpus and a config file pointing at it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from .helpers import synthetic_pairs, tiny_config, write_anki


@pytest.fixture
def anki_file(tmp_path: Path) -> Path:
    return write_anki(tmp_path / "pairs.txt", synthetic_pairs(), attribution=True)


@pytest.fixture
def config_file(tmp_path: Path, anki_file: Path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(tiny_config(tmp_path, anki_file)), encoding="utf-8")
    return path
