#!/usr/bin/env python
"""A trained model on both engines over its test set: how many beam translations are the same,
how far apart the scores of the same translations are, and each engine's sentences/s.

    python scripts/bench/onnx_parity.py --run runs/eng-mar-cpu          # beam 5, the whole test set
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch

from nmt.config.paths import prepared_paths
from nmt.core.device import select_device
from nmt.core.hardware import hardware_description
from nmt.data.references import read_references
from nmt.export.package import export_model
from nmt.pipelines.translate import Translator
from nmt.runtime.loading import load_packages, load_run_config


def timed_search(translator: Translator, sources: list[str], beam: int):
    translator.search(sources[:64], beam)  # warm-up
    started = time.perf_counter()
    found = translator.search(sources, beam)
    return found, time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", default="runs/eng-mar-cpu")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    package = Path(tempfile.mkdtemp(prefix="onnx-parity-")) / "pkg"
    export_model(Path(args.run), package, onnx=True)
    engines = {name: Translator(load_packages([package], select_device("cpu"), name)) for name in ("torch", "onnx")}
    sources = read_references(prepared_paths(load_run_config(Path(args.run))).multi("test")).sources
    results = {name: timed_search(translator, sources, args.beam) for name, translator in engines.items()}
    texts = {name: [engines[name].detokenize(h[0]) for h in found] for name, (found, _) in results.items()}
    same = [i for i, (a, b) in enumerate(zip(texts["torch"], texts["onnx"])) if a == b]
    gaps = [abs(results["torch"][0][i][0].score - results["onnx"][0][i][0].score) for i in same]
    print(f"Hardware: {hardware_description()}; {torch.get_num_threads()} threads")
    print(f"{args.run}, {len(sources)} test sources, beam {args.beam}")
    print(f"the same translation: {len(same)}/{len(sources)} ({100 * len(same) / len(sources):.2f} %)")
    print(f"largest score difference among them: {max(gaps):.2e}")
    for name, (_, seconds) in results.items():
        print(f"{name}: {len(sources) / seconds:.1f} sentences/s")
    for i in [i for i in range(len(sources)) if i not in set(same)][:5]:
        print(f"  differs: {sources[i]!r}: torch {texts['torch'][i]!r} / onnx {texts['onnx'][i]!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
