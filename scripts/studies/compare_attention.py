#!/usr/bin/env python
"""Train every attention variant on the same prepared data and budget, then compare them.

Writes into --out (default docs/attention/):
  results.md            table: test BLEU / chrF (all references), parameters, training time, tokens/s
  results.json          the same, plus BLEU by source-length bucket for each variant
  bleu_by_length.png    BLEU by source length for each variant, the no-attention baseline dashed
  heatmaps/             attention heatmaps of a few test sentences for each variant

Runs go to --runs (default runs/compare-attention/); an interrupted comparison picks up
where it stopped. Example (about 20 minutes on a 2-core CPU):

    python scripts/studies/compare_attention.py --config configs/baseline/eng-mar-cpu.yaml --epochs 5
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from nmt.config.files import load_config
from nmt.config.paths import prepared_paths, run_paths
from nmt.core.device import prepare_device
from nmt.core.fileio import write_text_atomic
from nmt.core.plotting import plot_attention, plot_bleu_by_length
from nmt.core.registry import ATTENTIONS
from nmt.data.references import read_references
from nmt.decoding.scoring import score, score_by_length
from nmt.model.base import count_parameters
from nmt.pipelines.prepare import prepare
from nmt.pipelines.translate import Translator
from nmt.runtime.loading import load_checkpoints
from nmt.training.metrics import MetricsFile
from nmt.training.trainer import build_trainer

# name -> config overrides: every registered attention (a plugin's too, with --plugin in --set's
# config), then the papers' combinations. Windows use D = 3: Anki sentences are short (about 8 subwords).
VARIANTS = {
    **{name: [f"model.attention={name}"] for name in ATTENTIONS},
    "luong-general+feed": ["model.attention=luong-general", "model.input_feeding=true"],
    "luong-general/local-m": [
        "model.attention=luong-general",
        "model.attention_window=local-m",
        "model.window_width=3",
    ],
    "luong-general/local-p": [
        "model.attention=luong-general",
        "model.attention_window=local-p",
        "model.window_width=3",
    ],
}
HEATMAP_SENTENCES = 3


def run_variant(name: str, overrides: list[str], args, device: torch.device) -> dict:
    run_dir = Path(args.runs) / name.replace("/", "_")
    config = load_config(
        args.config,
        [
            *args.set,
            *overrides,
            f"run_dir={run_dir}",
            f"data.prepared_dir={Path(args.runs) / 'data'}",
            f"train.epochs={args.epochs}",
            f"train.patience={args.epochs}",  # same budget for all: no early stopping
        ],
    )
    result_path = run_dir / "result.json"
    if result_path.is_file():
        return json.loads(result_path.read_text(encoding="utf-8"))
    prepare(config, log=lambda _: None)
    started = time.perf_counter()
    progress = build_trainer(config, device, show_bar=False).run(resume=True)
    wall = time.perf_counter() - started
    records = MetricsFile(run_paths(config).metrics).read()

    translator = Translator(load_checkpoints(config, ["best"], device))
    test_set = read_references(prepared_paths(config).multi("test"))
    sources, references = test_set.sources, test_set.references
    hypotheses = translator.translate(sources)
    scores = score(hypotheses, references)
    result = {
        "variant": name,
        "overrides": overrides,
        "parameters": count_parameters(translator.model),
        "test_bleu": scores["bleu"],
        "test_chrf": scores["chrf"],
        "best_dev_bleu": progress.best_bleu,
        "best_epoch": progress.best_epoch,
        "train_seconds": round(progress.train_seconds, 1),
        "wall_seconds": round(wall, 1),
        "tokens_per_s": round(sum(r["tokens_per_s"] for r in records) / len(records), 1),
        "bleu_by_length": score_by_length(hypotheses, references, sources),
        "signature": scores["signature"]["bleu"],
        "beam_size": config.decode.beam_size,
    }
    heatmaps = Path(args.out) / "heatmaps"
    if config.model.attention != "none":
        for number, heatmap in enumerate(translator.heatmaps(sources[:HEATMAP_SENTENCES]), 1):
            path = heatmaps / f"{name.replace('/', '_')}_{number}.png"
            title = f"{name}: {heatmap.source}\n{heatmap.translation}"
            plot_attention(heatmap.src_labels, heatmap.tgt_labels, heatmap.weights, path, title=title)
    write_text_atomic(result_path, json.dumps(result, indent=2, ensure_ascii=False))
    return result


def markdown_table(results: list[dict], args) -> str:
    lines = [
        f"Budget: {args.epochs} epochs each, base config `{args.config}`"
        + (f" with {' '.join(args.set)}" if args.set else "")
        + f"; test BLEU/chrF with beam {results[0]['beam_size']} against all references "
        f"(`{results[0]['signature']}`).",
        "",
        "| variant | test BLEU | test chrF | best dev BLEU (epoch) | parameters | training time | tokens/s |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r['variant']} | {r['test_bleu']:.2f} | {r['test_chrf']:.2f} "
            f"| {r['best_dev_bleu']:.2f} ({r['best_epoch']}) "
            f"| {r['parameters']:,} | {r['train_seconds']:.0f} s | {r['tokens_per_s']:,.0f} |"
        )
    buckets = [row["bucket"] for row in results[0]["bleu_by_length"]]
    counts = [row["sentences"] for row in results[0]["bleu_by_length"]]
    lines += [
        "",
        "BLEU by source length (words; sentences per bucket in brackets):",
        "",
        "| variant | " + " | ".join(f"{b} ({n})" for b, n in zip(buckets, counts)) + " |",
        "|---|" + "---:|" * len(buckets),
    ]
    for r in results:
        lines.append(f"| {r['variant']} | " + " | ".join(f"{row['bleu']:.1f}" for row in r["bleu_by_length"]) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="configs/baseline/eng-mar-cpu.yaml", help="base config")
    parser.add_argument("--epochs", type=int, default=5, help="training budget per variant")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--set", nargs="*", default=[], help="extra config overrides for every variant")
    parser.add_argument("--out", default="docs/attention", help="results folder")
    parser.add_argument("--runs", default="runs/compare-attention", help="where the runs go")
    parser.add_argument("--device", default="auto")
    args = parser.parse_args(argv)
    device = prepare_device(args.device)
    results = []
    for name in args.variants:
        print(f"== {name}", file=sys.stderr, flush=True)
        results.append(run_variant(name, VARIANTS[name], args, device))
        print(f"   test BLEU {results[-1]['test_bleu']:.2f}", file=sys.stderr, flush=True)
    out = Path(args.out)
    write_text_atomic(out / "results.md", markdown_table(results, args))
    write_text_atomic(out / "results.json", json.dumps(results, indent=2, ensure_ascii=False))
    plot_bleu_by_length({r["variant"]: r["bleu_by_length"] for r in results}, out / "bleu_by_length.png")
    print((out / "results.md").read_text(encoding="utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
