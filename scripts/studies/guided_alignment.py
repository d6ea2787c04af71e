#!/usr/bin/env python
"""Guided alignment on eng-mar: the RNN recipe and the Transformer nmt init writes, each trained
without and with ``train.guided_alignment`` (each weight of --weights, 0 being without), two
seeds, the same epochs; then test BLEU and chrF (all references, the recipe's beam) and the
agreement with eflomal on the test pairs (AER, the model's default alignment: the produced step;
a guided Transformer's guided head).

Runs train --parallel at a time, one thread each (a fixed count of epochs: the table does not
depend on the machine's load, and two one-thread runs use a 2-core CPU fully). Writes --out
(default docs/alignment/): guided.json and guided.md. About 40 minutes on a 2-core CPU:

    python scripts/studies/guided_alignment.py --epochs 4 --seeds 1 2 --weights 0 0.1
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import torch
from alignment import (  # the study beside this one: its Transformer, test pairs, runs, scores and files
    TRANSFORMER,
    scores,
    study_config,
    test_pairs,
    write_results,
)

from nmt.config.paths import run_paths
from nmt.config.schema import Config
from nmt.pipelines.evaluate import evaluate, evaluation_set
from nmt.pipelines.translate import Translator
from nmt.runtime.loading import load_checkpoints
from nmt.training.launch import train

FAMILIES = {"rnn": [], "transformer": TRANSFORMER}


def config_of(args, family: str, weight: float, seed: int) -> Config:
    overrides = [*FAMILIES[family], f"train.guided_alignment={weight}", "train.threads=1"]
    return study_config(args, f"{family}-guided{weight:g}-seed{seed}", seed, overrides)


def train_one(args, family: str, weight: float, seed: int) -> str:
    config = config_of(args, family, weight, seed)
    if not run_paths(config).checkpoint("best").is_file():
        train(config, torch.device("cpu"))
    return config.run_dir


def measure(args) -> dict:
    sources, targets, reference = test_pairs(args.config, args.runs)
    runs = [(family, weight, seed) for seed in args.seeds for family in args.families for weight in args.weights]
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(args.parallel, mp_context=spawn) as pool:
        list(pool.map(train_one, *zip(*[(args, *run) for run in runs])))
    results: dict = {"epochs": args.epochs, "pairs": len(sources), "runs": {}}
    torch.set_num_threads(2)
    for family, weight, seed in runs:
        config = config_of(args, family, weight, seed)
        translator = Translator(load_checkpoints(config, ["best"], torch.device("cpu")), None, config.decode)
        test_set, _ = evaluation_set(config, None, [])
        report = evaluate(translator, test_set, "test", ["best"])
        row = {"bleu": report["bleu"], "chrf": report["chrf"], **scores(translator, sources, targets, reference)}
        results["runs"].setdefault(f"{family} {weight:g}", {})[str(seed)] = row
        print(family, weight, seed, row, file=sys.stderr, flush=True)
    return results


def table(results: dict) -> str:
    lines = [
        f"Test BLEU and chrF (all references) and AER against eflomal (lower is better) on {results['pairs']:,} "
        f"test pairs, {results['epochs']} epochs each; each seed's figure, then their mean.",
        "",
        "| model | train.guided_alignment | BLEU | chrF | AER | precision | recall |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, seeds in results["runs"].items():
        family, weight = name.split()
        cells = []
        for field in ("bleu", "chrf", "aer", "precision", "recall"):
            values = [run[field] for run in seeds.values()]
            each = " / ".join(f"{v:.2f}" if field in ("bleu", "chrf") else f"{v:.3f}" for v in values)
            mean = statistics.mean(values)
            cells.append(f"{each} ({mean:.2f})" if field in ("bleu", "chrf") else f"{each} ({mean:.3f})")
        lines.append(f"| {family} | {weight} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="configs/eng-mar-cpu.yaml")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--weights", type=float, nargs="+", default=[0.0, 0.1])
    parser.add_argument("--families", nargs="+", default=list(FAMILIES), choices=list(FAMILIES))
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--runs", default="runs/guided")
    parser.add_argument("--out", default="docs/alignment")
    args = parser.parse_args(argv)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    results = measure(args)
    write_results(args.out, "guided", results, table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
