"""Record what the legacy fixtures (tests/data/legacy) translate to: run once, with the code that
wrote them (237828a, before each model family owned its settings), so that tests/test_legacy.py
can check that a later version loads them and translates output for output.

    python scripts/dev/record_legacy_fixtures.py > tests/data/legacy/expected.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from nmt.pipelines.translate import Translator
from nmt.runtime.loading import load_trained

LEGACY = Path(__file__).resolve().parents[2] / "tests" / "data" / "legacy"


def record() -> dict:
    sources = (LEGACY / "rnn-run" / "data" / "test.en").read_text(encoding="utf-8").splitlines()
    found = {}
    for name in ("rnn-run", "transformer-package"):
        translator = Translator(load_trained(LEGACY / name, torch.device("cpu")))
        translations = translator.translate(sources, beam_size=2)
        scores = [round(h.score, 4) for h in translator.score(sources, translations)]
        found[name] = {"sources": sources, "beam_2": translations, "scores": scores}
    return found


if __name__ == "__main__":
    json.dump(record(), sys.stdout, ensure_ascii=False, indent=1)
    print()
