#!/usr/bin/env python
"""Does attention align? Each attention the seed papers describe, and a Transformer's every layer
and head, held against eflomal's links on the test pairs (AER, precision, recall), two seeds,
with the step that produces a target word and the step it is fed (Shift-Att).

Every variant trains the same prepared data (that of --config) for --epochs epochs (a fixed
count, not minutes: the table does not depend on the machine's load), then aligns the test
pairs by forced decoding. eflomal aligns the test pairs beside the training pairs once.

Writes --out (default docs/alignment/): results.json and results.md. Runs go to --runs (default
runs/alignment/); a finished run is reused. About 45 minutes on a 2-core CPU:

    python scripts/studies/alignment.py --config configs/eng-mar-cpu.yaml --epochs 4 --seeds 1 2
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch
from compare_attention import VARIANTS as COMPARED  # the local windows' overrides (a study beside this one)
from quality import UNGUIDED, check_variants

from nmt.config.files import load_config
from nmt.config.paths import prepared_paths, run_paths
from nmt.config.recipes import recipes
from nmt.config.schema import Config
from nmt.core.fileio import write_text_atomic
from nmt.data.alignments import Links, agreement, kept_eflomal_alignments
from nmt.pipelines.align import model_alignments, target_ids, training_pairs
from nmt.pipelines.prepare import prepare
from nmt.pipelines.translate import Translator
from nmt.runtime.loading import load_checkpoints
from nmt.training.launch import train

# the Transformer nmt init writes (nmt/recipes.yaml's families), over --config's tokenizer and batches
TRANSFORMER = [
    f"{section}.{key}={str(value).lower() if isinstance(value, bool) else value}"
    for section, values in recipes().families["transformer"].settings.items()
    for key, value in values.items()
]
# name -> overrides of --config: the seeds' attentions (windows of D = 3: the sentences are short)
VARIANTS = {
    "bahdanau": ["model.attention=bahdanau"],
    "transformer": TRANSFORMER,
    "luong-general": ["model.attention=luong-general"],
    "luong-concat": ["model.attention=luong-concat"],
    **{name: COMPARED[name] for name in ("luong-general/local-m", "luong-general/local-p")},
    "hard": ["model.attention=hard"],
    "luong-dot": ["model.attention=luong-dot", "model.encoder_hidden=128"],  # dot needs s and h equally wide
}
STEPS = ("produced", "input")
# the attention as these studies measured it, untaught (UNGUIDED): configs/eng-mar-cpu.yaml now trains
# with guided alignment (docs/alignment.md), which guided_alignment.py sets by weight over this


def study_config(args, run_name: str, seed: int, overrides: list[str]) -> Config:
    """--config with ``overrides`` as one run of a study: its folder ``run_name`` under --runs,
    --config's prepared data shared, ``seed``, --epochs and no time budget."""
    base = load_config(args.config, UNGUIDED)
    return load_config(
        args.config,
        [
            *UNGUIDED,
            *overrides,
            f"run_dir={Path(args.runs) / run_name}",
            f"data.prepared_dir={prepared_paths(base).root}",
            f"train.seed={seed}",
            f"train.epochs={args.epochs}",
            "train.max_minutes=0",
            "train.validation_sentences=300",  # the best checkpoint by a sample of dev: validation is not timed here
        ],
    )


def write_results(out: str, stem: str, results: dict, markdown: str) -> None:
    """A study's results as ``stem``.json and its table as ``stem``.md in ``out``, and the table shown."""
    write_text_atomic(Path(out) / f"{stem}.json", json.dumps(results, indent=1) + "\n")
    write_text_atomic(Path(out) / f"{stem}.md", markdown)
    print(markdown)


def trained(args, name: str, seed: int) -> Config:
    """The config of variant ``name`` at ``seed``, trained (reused when its run finished)."""
    config = study_config(args, f"{name.replace('/', '-')}-seed{seed}", seed, VARIANTS[name])
    if not run_paths(config).checkpoint("best").is_file():
        print(f"training {name}, seed {seed}", file=sys.stderr, flush=True)
        train(config, torch.device("cpu"))
    return config


def scores(translator: Translator, sources, targets, reference: list[Links], **choice) -> dict:
    found = model_alignments(translator, sources, target_ids(translator, targets), **choice)
    return agreement(reference, found).to_dict()


def test_pairs(config_path: str, runs: str) -> tuple[list[str], list[str], list[Links]]:
    """--config's prepared test pairs and eflomal's links of them beside its training pairs,
    computed once and kept in --runs (the reference every study here holds models against)."""
    base = load_config(config_path, UNGUIDED)
    prepare(base, log=lambda _: None)
    paths = prepared_paths(base)
    sources, targets = (paths.text("test", side).read_text(encoding="utf-8").splitlines() for side in ("src", "tgt"))
    reference = kept_eflomal_alignments(Path(runs) / "eflomal.test.txt", sources, targets, training_pairs(base))
    return sources, targets, reference


def measure(args) -> dict:
    sources, targets, reference = test_pairs(args.config, args.runs)
    results: dict = {"epochs": args.epochs, "pairs": len(sources), "variants": {}}
    for seed in args.seeds:  # every variant at the first seed first: a stopped study has them all once
        for name in VARIANTS:
            config = trained(args, name, seed)
            translator = Translator(load_checkpoints(config, ["best"], torch.device("cpu")), None, config.decode)
            row = {step: scores(translator, sources, targets, reference, step=step) for step in STEPS}
            if config.model.arch == "transformer":
                for layer in range(config.model.decoder_layers):
                    for head in [None, *range(config.model.heads)]:
                        heads = None if head is None else [head]
                        key = f"layer {layer}" + ("" if head is None else f" head {head}")
                        row[key] = scores(translator, sources, targets, reference, layer=layer, heads=heads)
            results["variants"].setdefault(name, {})[str(seed)] = row
            print(name, seed, {k: v["aer"] for k, v in row.items()}, file=sys.stderr, flush=True)
            write_text_atomic(Path(args.out) / "results.json", json.dumps(results, indent=1) + "\n")
    return results


def table(results: dict) -> str:
    lines = [
        f"AER against eflomal (lower is better), mean of seeds {', '.join(next(iter(results['variants'].values())))}; "
        f"{results['pairs']:,} test pairs, {results['epochs']} epochs each.",
        "",
        "| model | produced | input (Shift-Att) | precision (produced) | recall (produced) |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, seeds in results["variants"].items():
        keys = [k for k in next(iter(seeds.values())) if k not in STEPS] if name == "transformer" else []
        for key in ["", *keys]:
            mean = {
                field: statistics.mean(run[key or "produced"][field] for run in seeds.values())
                for field in ("aer", "precision", "recall")
            }
            shifted = "" if key else f"{statistics.mean(run['input']['aer'] for run in seeds.values()):.3f}"
            label = name if not key else f"{name}, {key} (produced)"
            lines.append(
                f"| {label} | {mean['aer']:.3f} | {shifted} | {mean['precision']:.3f} | {mean['recall']:.3f} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="configs/eng-mar-cpu.yaml")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--runs", default="runs/alignment")
    parser.add_argument("--out", default="docs/alignment")
    parser.add_argument("--only", nargs="*", help="these variants alone (default: all)")
    parser.add_argument("--check", action="store_true", help="load every variant's config, train nothing")
    args = parser.parse_args(argv)
    if args.only:
        for name in [n for n in VARIANTS if n not in args.only]:
            del VARIANTS[name]
    if args.check:  # each variant as study_config loads it
        return check_variants([(name, args.config, [*UNGUIDED, *overrides]) for name, overrides in VARIANTS.items()])
    Path(args.out).mkdir(parents=True, exist_ok=True)
    results = measure(args)
    write_results(args.out, "results", results, table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
