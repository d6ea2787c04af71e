"""Training and search behave today as recorded in ``data/behaviour_reference.json``, on any CPU.

For ``configs/tiny.yaml`` and three variants (both decoder orders, input feeding, a local
window, a model that has learned something): the losses of every epoch, the final weights
(within a tolerance derived from float32 rounding over the run, ``tests/behaviour.py``) and
the translations of fixed inputs with beams 1, 2 and 5. A change to training, the model or
search that is meant to keep behaviour must pass this; a small real change fails it (below).
Record again, after a change meant to alter behaviour, with ``python -m tests.behaviour record``.
"""

from __future__ import annotations

import json

import pytest
import torch

from .behaviour import (
    REFERENCE_PATH,
    TOLERANCE_FACTOR,
    VARIANTS,
    distance,
    epoch_losses,
    fingerprint,
    train_variant,
    translations,
)

REFERENCE = json.loads(REFERENCE_PATH.read_text(encoding="utf-8"))
LOSS_RESOLUTION = 5e-4  # metrics.jsonl keeps 4 decimals


def differences(trainer, expected: dict) -> list[str]:
    """How a trained run differs from its recorded reference, beyond rounding (empty: none)."""
    found = []
    moved = distance(fingerprint(trainer.model), expected["weights"])
    allowed = TOLERANCE_FACTOR * expected["rounding_distance"]
    if moved > allowed:
        found.append(f"weights moved {moved:.2e} (relative) from the reference; rounding allows {allowed:.2e}")
    loss_tolerance = max(TOLERANCE_FACTOR * expected["rounding_loss_drift"], LOSS_RESOLUTION)
    losses = epoch_losses(trainer)
    if len(losses) != len(expected["losses"]) or any(
        abs(a - b) > loss_tolerance for got, want in zip(losses, expected["losses"]) for a, b in zip(got, want)
    ):
        found.append(f"epoch losses {losses} differ from {expected['losses']} by more than {loss_tolerance}")
    for beam, lines in translations(trainer).items():
        if lines != expected[beam]:
            found.append(f"{beam}: {lines} != {expected[beam]}")
    return found


def test_the_reference_covers_every_variant():
    assert sorted(REFERENCE["variants"]) == sorted(VARIANTS)
    for name, overrides in VARIANTS.items():
        assert REFERENCE["variants"][name]["set"] == overrides
        assert 0 < REFERENCE["variants"][name]["rounding_distance"] < 1e-4, name


@pytest.mark.slow
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_training_and_search_match_the_recorded_reference(tmp_path, variant):
    trainer = train_variant(tmp_path / "run", VARIANTS[variant])
    assert differences(trainer, REFERENCE["variants"][variant]) == []


def draw_one_more_random_number(model: torch.nn.Module) -> None:
    """Every dropout mask of the run is drawn differently (the initial weights are the same)."""
    torch.rand(1)


def scale_the_output_layer(model: torch.nn.Module) -> None:
    """One tensor's initialisation changed by 0.1 %."""
    with torch.no_grad():
        model.decoder.output.weight.mul_(1.001)


@pytest.mark.slow
@pytest.mark.parametrize("change", [draw_one_more_random_number, scale_the_output_layer])
def test_a_small_real_change_fails_the_reference(tmp_path, change):
    trainer = train_variant(tmp_path / "run", VARIANTS["bahdanau-2k"], tweak=change)
    found = differences(trainer, REFERENCE["variants"]["bahdanau-2k"])
    assert any(line.startswith("weights moved") for line in found), found
