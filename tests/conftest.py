"""Shared fixtures: a small synthetic Anki corpus and configs pointing at it."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import pytest
import yaml

SUBJECTS = {"I": "मी", "you": "तू", "we": "आम्ही", "they": "ते", "she": "ती"}
VERBS = {"see": "पाहतो", "want": "हवे", "like": "आवडते", "eat": "खातो"}
OBJECTS = {"apples": "सफरचंद", "water": "पाणी", "books": "पुस्तके", "tea": "चहा", "rice": "भात", "milk": "दूध"}


def synthetic_pairs(seed: int = 0) -> list[tuple[str, str]]:
    """English 'S V O.' -> Devanagari 'S O V.' for every combination; some get a second translation."""
    rng = random.Random(seed)
    pairs = []
    for (s, ts), (v, tv), (o, to) in itertools.product(SUBJECTS.items(), VERBS.items(), OBJECTS.items()):
        pairs.append((f"{s} {v} {o}.", f"{ts} {to} {tv}."))
        if rng.random() < 0.3:
            pairs.append((f"{s} {v} {o}.", f"{ts} {to} {tv}!"))
    return pairs


def write_anki(path: Path, pairs: list[tuple[str, str]], attribution: bool = False) -> Path:
    lines = [f"{s}\t{t}" + (f"\tCC-BY 2.0 (France) Attribution: tatoeba.org #{i}" if attribution else "") for i, (s, t) in enumerate(pairs)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def tiny_config(tmp_path: Path, data_path: Path, **sections) -> dict:
    config = {
        "run_dir": str(tmp_path / "run"),
        "data": {"path": str(data_path), "dev_size": 0.1, "test_size": 0.1},
        "tokenizer": {"src_vocab_size": 300, "tgt_vocab_size": 300},
        "model": {"embed_dim": 32, "encoder_hidden": 32, "decoder_hidden": 32, "attention_dim": 32, "output_dim": 32, "dropout": 0.0},
        "train": {"epochs": 2, "batch_size": 16, "threads": 1, "seed": 7},
        "decode": {"beam_size": 2},
    }
    for section, values in sections.items():
        if isinstance(values, dict):
            config.setdefault(section, {}).update(values)
        else:
            config[section] = values
    return config


@pytest.fixture
def anki_file(tmp_path: Path) -> Path:
    return write_anki(tmp_path / "pairs.txt", synthetic_pairs(), attribution=True)


@pytest.fixture
def config_file(tmp_path: Path, anki_file: Path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(tiny_config(tmp_path, anki_file)), encoding="utf-8")
    return path
