#!/usr/bin/env python
"""A learning curve: test BLEU against corpus size, one line per recipe (docs/small-data.md).

    python scripts/studies/learning_curve.py --seeds 1 2 --hindi   # every size, every recipe (hours)

eng-mar is subsampled by English source (every translation of a sentence stays together, a
seeded order of the sources): a subset of N pairs holds N training pairs plus the 200 dev and
400 test sources that `nmt prepare` carves from it, as for the eng-hin export (so each point
has its own dev and test, scored with all their references). Each recipe trains on each
subset under the same wall-clock budget with each seed; eng-hin (2,549 pairs, its own split)
is a point beside them (--hindi; --sizes with no size trains that point alone). The
related-language recipe trains each corpus beside the other (RELATED): the eng-mar subsets
beside the eng-hin file, eng-hin beside eng-mar. A point counts the pair's own training
pairs. Finished runs are reused. Writes OUT/curve.json and OUT/curve.png, and prints a
markdown table.
"""

from __future__ import annotations

import json
import random
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from quality import (
    PRE_NORM,
    UNGUIDED,
    check_variants,
    prepared_dir,
    results_so_far,
    study_arguments,
    trained_and_scored,
)

from nmt.core.device import prepare_device
from nmt.core.fileio import write_text_atomic

SOURCE = Path("data/eng-mar/mar.txt")
CARVED = ["data.dev_size=200", "data.test_size=400"]
# recipe -> (config, overrides): the shipped eng-mar CPU recipe, the one eng-hin ships from scratch,
# and that one trained beside the other corpus (RELATED: each source tagged with its target,
# the pair's own pairs twice an epoch beside up to 3,000 related ones drawn afresh, the pair
# alone after 60 % of the budget, as configs/eng-hin-mixed.yaml spends it)
RELATED_RECIPE = "related-language training (the eng-hin recipe beside the other corpus)"
RELATED_TRANSFORMER = "Transformer recipe beside the other corpus"
BESIDE = ["data.oversample=2", "train.related_per_epoch=3000", "train.related_until=0.6"]
RECIPES = {
    # as measured, before it trained with guided alignment (whose links are eng-mar's alone)
    "eng-mar CPU recipe": ("configs/eng-mar-cpu.yaml", ["data.links=", "train.guided_alignment=0"]),
    "eng-hin recipe (input feeding, 2,000 pieces)": ("configs/eng-hin-scratch.yaml", ["data.tgt_lang=mr"]),
    RELATED_RECIPE: ("configs/eng-hin-scratch.yaml", ["data.tgt_lang=mr", *BESIDE]),
    # the Transformer's CPU recipe (docs/transformer.md): where its line crosses the RNN's, alone
    # and beside the other corpus as the RNN's related-language line, pre-norm as measured
    "Transformer recipe (2 + 2 layers)": ("configs/eng-mar-transformer.yaml", [*PRE_NORM, *UNGUIDED]),
    RELATED_TRANSFORMER: ("configs/eng-mar-transformer.yaml", [*PRE_NORM, *UNGUIDED, *BESIDE]),
}
BESIDE_OTHER = (RELATED_RECIPE, RELATED_TRANSFORMER)  # the recipes trained beside the other corpus
HINDI = ["data.path=data/eng-hin/hin.txt", "data.tgt_lang=hi"]
# the related corpus of each corpus: the eng-mar subsets learn beside the eng-hin file, eng-hin beside eng-mar
RELATED = {
    "eng-mar": "data.related={hi: data/eng-hin/hin.txt}",
    "eng-hin": "data.related={mr: data/eng-mar/mar.txt}",
}


def subset(size: int, folder: Path, seed: int = 1234) -> Path:
    """The first sources of a seeded order of eng-mar's, with all their pairs, until ``size``
    training pairs plus about 600 sources for dev and test (written once, as a TSV)."""
    path = folder / f"eng-mar-{size}.tsv"
    if path.is_file():
        return path
    groups: dict[str, list[str]] = defaultdict(list)
    for line in SOURCE.read_text(encoding="utf-8").splitlines():
        if line.count("\t") >= 1:
            groups[line.split("\t")[0]].append(line)
    order = sorted(groups)
    random.Random(seed).shuffle(order)
    pairs_per_source = sum(len(g) for g in groups.values()) / len(groups)
    wanted = size + round(600 * pairs_per_source)  # what prepare carves for dev and test, on average
    lines: list[str] = []
    for source in order:
        if len(lines) >= wanted:
            break
        lines += groups[source]
    folder.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, "\n".join(lines) + "\n")
    return path


def plot(results: dict, path: Path) -> None:
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6.4, 4.0))
    for recipe, points in results.items():
        sizes = sorted({p["pairs"] for p in points if p["corpus"] == "eng-mar"})
        means = [statistics.fmean(p["bleu"] for p in points if p["pairs"] == n) for n in sizes]
        line = axes.plot(sizes, means, marker="o", label=recipe)[0]
        for p in points:
            if p["corpus"] == "eng-hin":
                axes.plot([p["pairs"]], [p["bleu"]], marker="*", markersize=11, color=line.get_color())
    axes.set_xscale("log")
    hindi = any(p["corpus"] == "eng-hin" for points in results.values() for p in points)
    axes.set_xlabel("training pairs (eng-mar subsets" + ("; star: eng-hin)" if hindi else ")"))
    axes.set_ylabel("test BLEU (all references)")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16))  # below: the lines fill the axes
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(figure)


def main(argv: list[str] | None = None) -> int:
    parser = study_arguments(__doc__, list(RECIPES), "runs/curve", "docs/small-data", "cpu")
    parser.add_argument("--sizes", type=int, nargs="*", default=[1000, 2500, 5000, 10000, 15000, 20000])
    parser.add_argument("--hindi", action="store_true", help="also train each recipe on eng-hin")
    args = parser.parse_args(argv)
    if args.check:
        related = {name: [RELATED["eng-hin"]] if name in BESIDE_OTHER else [] for name in RECIPES}
        return check_variants(
            [(name, config, [*overrides, *HINDI, *related[name]]) for name, (config, overrides) in RECIPES.items()]
        )
    device = prepare_device(args.device)
    out = Path(args.out)
    results_path = out / "curve.json"
    results = results_so_far(results_path)
    corpora = [(f"eng-mar-{n}", [f"data.path={subset(n, Path(args.runs) / 'subsets')}", *CARVED]) for n in args.sizes]
    corpora += [("eng-hin", [*HINDI, *CARVED])] if args.hindi else []
    for recipe in args.variants:
        config, recipe_overrides = RECIPES[recipe]
        for corpus, corpus_overrides in corpora:
            name = "eng-hin" if corpus == "eng-hin" else "eng-mar"
            related = [RELATED[name]] if recipe in BESIDE_OTHER else []
            overrides = [*recipe_overrides, *corpus_overrides, *related]
            for seed in args.seeds:
                print(f"== {recipe} on {corpus}, seed {seed}", file=sys.stderr, flush=True)
                # a folder per config: two recipes with the same overrides (none) must not share runs
                runs = Path(args.runs) / Path(config).stem
                row = trained_and_scored(config, overrides, [], args.minutes, runs, device, seed, samples=0)
                report = json.loads((prepared_dir(runs, overrides) / "report.json").read_text())
                own = report["pairs_kept"] - report["split_pairs"]["dev"] - report["split_pairs"]["test"]
                point = {"corpus": name, "seed": seed, "pairs": own, **row}  # the pair's own, without related ones
                same = (point["corpus"], point["pairs"], seed)
                kept = [p for p in results.get(recipe, []) if (p["corpus"], p["pairs"], p["seed"]) != same]
                results[recipe] = [*kept, point]
                write_text_atomic(results_path, json.dumps(results, indent=2, ensure_ascii=False))
                print(f"   {point['pairs']} pairs: test BLEU {row['bleu']:.2f}", file=sys.stderr, flush=True)
    plot(results, out / "curve.png")
    print("| recipe | corpus | training pairs | test BLEU (per seed) | chrF | epochs |\n|---|---|---:|---|---:|---:|")
    for recipe, points in results.items():
        for key in sorted({(p["corpus"], p["pairs"]) for p in points}, key=lambda k: k[1]):
            same = [p for p in points if (p["corpus"], p["pairs"]) == key]
            bleu = " / ".join(f"{p['bleu']:.2f}" for p in sorted(same, key=lambda p: p["seed"]))
            chrf, epochs = statistics.fmean(p["chrf"] for p in same), statistics.fmean(p["epochs"] for p in same)
            print(f"| {recipe} | {key[0]} | {key[1]:,} | {bleu} | {chrf:.2f} | {epochs:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
