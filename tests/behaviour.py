"""The behaviour reference: what training and search produce for ``configs/tiny.yaml`` and
three variants, recorded in ``tests/data/behaviour_reference.json`` and compared by
``tests/test_behaviour_reference.py``.

Floats are never hashed: another CPU's kernels (AVX-512, AVX2, none; one thread or two) round
differently, and training carries those last bits forward. What is recorded instead:

* the train and dev loss of every epoch;
* a fingerprint of the final weights: every tensor's projections onto ``PROBES`` fixed random
  directions (numpy's PCG64, the same on every machine). The mean square of the projections'
  differences estimates the squared L2 distance between two weight sets, so the check reads
  "the weights moved less than X from the reference", relative to their norm;
* the translations of fixed inputs with beams 1, 2 and 5.

The tolerance is derived, not guessed: ``python -m tests.behaviour record`` trains each
variant again with its initial weights nudged by one float32 rounding step (a relative 2^-24
of noise, what a different kernel does to a sum) and measures how far that run ends from the
unnudged one. That distance is what rounding alone does over the run; the test allows
``TOLERANCE_FACTOR`` times it (the losses likewise, at the 4 decimals metrics.jsonl keeps).
Measured on an AMD EPYC (AVX2): ``ATEN_CPU_CAPABILITY=default`` ends 0.6 to 4 times the
rounding distance from the AVX2 reference, with the same translations as a reference recorded
on an AVX-512 Xeon. A real change moves the weights 800 (one tensor's initialisation changed
by 0.1 %) to 390,000 (every dropout mask drawn differently) times that distance
(``tests/test_behaviour_reference.py`` shows both fail).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
REFERENCE_PATH = Path(__file__).parent / "data" / "behaviour_reference.json"
CONFIG = "configs/tiny.yaml"
INPUTS = ["I am hungry.", "Where is the station?", "Do you like tea?", "Tom is my friend.", ""]
BEAMS = (1, 2, 5)
PROBES = 16  # random directions per tensor
TOLERANCE_FACTOR = 30.0  # times the distance one float32 rounding step at the start grows to
VARIANTS = {
    "tiny": [],
    "bahdanau-2k": ["data.max_pairs=2000", "train.learning_rate=0.005", "train.epochs=4"],
    "luong-concat-feeding-2k": [
        "data.max_pairs=2000",
        "train.learning_rate=0.005",
        "train.epochs=4",
        "model.attention=luong-concat",
        "model.input_feeding=true",
    ],
    "luong-general-local-p-2k": [
        "data.max_pairs=2000",
        "train.learning_rate=0.005",
        "train.epochs=4",
        "model.attention=luong-general",
        "model.attention_window=local-p",
    ],
}

Tweak = Callable[[torch.nn.Module], None]  # applied to the new model before its first step


def train_variant(run_dir: Path, overrides: list[str], tweak: Tweak | None = None):
    """Prepare and train ``CONFIG`` with ``overrides`` on the CPU into ``run_dir`` (in this
    process); ``tweak`` changes the model just before training. Returns the trainer."""
    from nmt.config.files import load_config
    from nmt.pipelines.prepare import prepare
    from nmt.training.trainer import build_trainer

    config = load_config(ROOT / CONFIG, [f"run_dir={run_dir}", *overrides])
    config.data.path = str(ROOT / config.data.path)
    prepare(config, log=lambda _: None)
    trainer = build_trainer(config, torch.device("cpu"), show_bar=False)
    trainer.log.echo = False
    if tweak is not None:
        tweak(trainer.model)
    trainer.run()
    return trainer


def epoch_losses(trainer) -> list[list[float]]:
    """[train loss, dev loss] of every epoch, from metrics.jsonl."""
    return [[r["train_loss"], r["dev_loss"]] for r in trainer.metrics.read()]


def recorded_name(model: torch.nn.Module, name: str) -> str:
    """A parameter's name as the reference records it: recorded when the Bahdanau decoder's
    cell was an ``nn.GRUCell``, whose parameters carry no layer suffix (old checkpoints are
    renamed the same way on load: ``nmt.runtime.checkpoint.upgrade_weight_names``)."""
    from nmt.model.rnn.decoder import BahdanauDecoder

    if isinstance(model.decoder, BahdanauDecoder) and name.startswith("decoder.rnn.") and name.endswith("_l0"):
        return name.removesuffix("_l0")
    return name


def fingerprint(model: torch.nn.Module) -> dict[str, list[float]]:
    """Each tensor's projections onto ``PROBES`` fixed standard-normal directions."""
    prints = {}
    for name, tensor in sorted(model.state_dict().items()):
        name = recorded_name(model, name)
        values = tensor.detach().double().cpu().numpy().ravel()
        seed = int.from_bytes(name.encode(), "little") % (2**63)
        directions = np.random.Generator(np.random.PCG64(seed)).standard_normal((PROBES, values.size))
        prints[name] = (directions @ values).tolist()
    return prints


def distance(prints: dict[str, list[float]], reference: dict[str, list[float]]) -> float:
    """Estimated L2 distance between the weights behind two fingerprints, relative to the
    reference weights' norm (both estimated from the projections)."""
    if prints.keys() != reference.keys():
        raise AssertionError(f"parameters differ: {sorted(prints.keys() ^ reference.keys())}")
    diff = sum(float(np.mean((np.array(prints[n]) - np.array(reference[n])) ** 2)) for n in reference)
    norm = sum(float(np.mean(np.array(reference[n]) ** 2)) for n in reference)
    return (diff / norm) ** 0.5


def translations(trainer) -> dict[str, list[str]]:
    from nmt.pipelines.translate import Translator
    from nmt.runtime.loading import LoadedModel

    trainer.model.eval()
    loaded = LoadedModel(trainer.config, trainer.model, trainer.src_tok, trainer.tgt_tok, torch.device("cpu"))
    translator = Translator(loaded)
    return {f"beam_{beam}": translator.translate(INPUTS, beam_size=beam) for beam in BEAMS}


def one_ulp_nudge(model: torch.nn.Module) -> None:
    """Multiply every weight by 1 ± 2^-24 (signs from a fixed generator): one float32
    rounding step, as another kernel's summation order gives."""
    generator = torch.Generator().manual_seed(12345)
    with torch.no_grad():
        for parameter in model.parameters():
            signs = torch.randint(0, 2, parameter.shape, generator=generator).float() * 2 - 1
            parameter.mul_(1 + signs * 2.0**-24)


def record(work_dir: Path) -> dict:
    """Train every variant twice (as is, and nudged by one rounding step) and write the reference."""
    variants = {}
    for name, overrides in VARIANTS.items():
        plain = train_variant(work_dir / name, overrides)
        nudged = train_variant(work_dir / f"{name}-nudged", overrides, tweak=one_ulp_nudge)
        prints = fingerprint(plain.model)
        losses = epoch_losses(plain)
        loss_drift = max(abs(a - b) for ra, rb in zip(losses, epoch_losses(nudged)) for a, b in zip(ra, rb))
        variants[name] = {
            "set": overrides,
            "losses": losses,
            "weights": prints,
            "rounding_distance": distance(fingerprint(nudged.model), prints),
            "rounding_loss_drift": loss_drift,
            **translations(plain),
        }
        print(f"{name}: rounding distance {variants[name]['rounding_distance']:.2e}, loss drift {loss_drift:.1e}")
    return {
        "config": CONFIG,
        "how": "python -m tests.behaviour record (CPU, 1 thread, seed 42)",
        "inputs": INPUTS,
        "probes": PROBES,
        "variants": variants,
    }


if __name__ == "__main__":
    import tempfile

    if sys.argv[1:] != ["record"]:
        sys.exit("usage: python -m tests.behaviour record")
    with tempfile.TemporaryDirectory() as tmp:
        reference = record(Path(tmp))
    REFERENCE_PATH.write_text(json.dumps(reference, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"Wrote {REFERENCE_PATH}")
