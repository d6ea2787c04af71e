"""How far above its threshold each variant of ``tests/test_learning.py`` learns, over seeds
and this process's CPU kernels: ``python -m tests.learning_margins [SEEDS...]``, run once per
kernel set (``ATEN_CPU_CAPABILITY=default|avx2|avx512``). The thresholds and step counts in
that test are set from these figures (docs/benchmarks.md, "Test margins")."""

from __future__ import annotations

import os
import sys

import torch

from .test_learning import VARIANTS, train_and_score, variant_config

if __name__ == "__main__":
    seeds = [int(s) for s in sys.argv[1:]] or [0, 1, 2]
    kernels = os.environ.get("ATEN_CPU_CAPABILITY", "native")
    for attention, window, feeding, task, steps, threshold in VARIANTS:
        scores = [train_and_score(variant_config(attention, window, feeding), task, steps, seed) for seed in seeds]
        label = f"{attention}/{window}{' +feeding' if feeding else ''} ({task}, {steps} steps, > {threshold})"
        print(f"{kernels:8s} {label:50s} " + " ".join(f"{s:.3f}" for s in scores), flush=True)
    print(f"torch {torch.__version__}")
