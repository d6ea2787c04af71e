"""Training and search give today the same weights and translations as a recorded reference.

``data/behaviour_reference.json`` was written before the code was reshaped: for
``configs/tiny.yaml`` (and three variants that exercise both decoder orders, input feeding,
a local window and a model that has learned something) it holds the sha256 of the trained
weights and the translations of fixed inputs with beams 1, 2 and 5. Any change to training,
the model or search that is meant to keep behaviour must keep these bit for bit.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = json.loads((Path(__file__).parent / "data" / "behaviour_reference.json").read_text(encoding="utf-8"))


def weights_sha256(checkpoint: Path) -> str:
    state = torch.load(checkpoint, map_location="cpu", weights_only=True)["model"]
    digest = hashlib.sha256()
    for name in sorted(state):
        digest.update(name.encode())
        digest.update(state[name].contiguous().numpy().tobytes())
    return digest.hexdigest()


def nmt(*args: str, stdin: str | None = None) -> str:
    done = subprocess.run([sys.executable, "-m", "nmt", *args], cwd=ROOT, input=stdin, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.slow
@pytest.mark.parametrize("variant", sorted(REFERENCE["variants"]))
def test_training_and_search_match_the_recorded_reference(tmp_path, variant):
    expected = REFERENCE["variants"][variant]
    sets = [x for item in [f"run_dir={tmp_path / 'run'}", *expected["set"]] for x in ("--set", item)]
    nmt("train", "--config", REFERENCE["config"], *sets)
    assert weights_sha256(tmp_path / "run" / "checkpoints" / "last.pt") == expected["weights_sha256"]
    lines = "\n".join(REFERENCE["inputs"]) + "\n"
    for beam in (1, 2, 5):
        out = nmt(
            "translate",
            "--config",
            REFERENCE["config"],
            *sets,
            "--checkpoint",
            "last",
            "--beam-size",
            str(beam),
            stdin=lines,
        )
        assert out.split("\n")[:-1] == expected[f"beam_{beam}"], f"beam {beam}"
