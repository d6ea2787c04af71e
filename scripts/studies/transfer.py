#!/usr/bin/env python
"""From scratch against from a parent, on the 2,549-pair English-Hindi export (docs/transfer.md).

    python scripts/studies/transfer.py --seeds 1 2    # every variant below, 5 minutes each

Each variant is a config plus overrides, trained under the same wall-clock budget with each seed
and scored on the eng-hin test split (beam search, all references) with the helpers of
scripts/studies/quality.py. A transfer variant starts from a parent the script trains first under the
same budget and seed (``configs/eng-mar-cpu.yaml`` plus the parent's overrides, in RUNS/parents):
seed N's child starts from seed N's parent, so the figures carry the parent's variance too.
Finished runs are reused. Writes OUT/results.json and prints a markdown table, then a dozen test
sentences with the reference and each variant's output.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from quality import (
    PRE_NORM,
    UNGUIDED,
    check_variants,
    measure_seeds,
    results_so_far,
    study_arguments,
    table,
    train_run,
    trained_and_scored,
)

from nmt.core.device import prepare_device
from nmt.data.references import read_references

HINDI = ["data.path=data/eng-hin/hin.txt", "data.tgt_lang=hi", "data.dev_size=200", "data.test_size=400"]
PARENT_CONFIG = "configs/eng-mar-cpu.yaml"  # what `bash scripts/main.sh` trains into runs/eng-mar-cpu
TRANSFORMER = "configs/eng-mar-transformer.yaml"
FEEDING = ["model.input_feeding=true"]  # the recipe before round 3 (docs/quality.md, third measurement)

# what the first eng-hin recipe tried on top of the eng-mar one (it lost: docs/transfer.md)
REGULARISED = [
    "model.dropout=0.4",
    "train.word_dropout=0.1",
    "tokenizer.src_vocab_size=1000",
    "tokenizer.tgt_vocab_size=1000",
    "train.batch_size=32",
]


RELATED = ["data.related={mr: data/eng-mar/mar.txt}"]  # one model for Hindi and Marathi, sources tagged
# configs/eng-hin.yaml as it was before the lexical model and the four children (docs/small-data.md,
# fifth and sixth measurements): one plain child, as the variants on it below were measured
ONE_CHILD = ["train.members=1", "decode.mbr=0"]
PLAIN = ["model.lexical=false", *ONE_CHILD]


@dataclass(frozen=True)
class Variant:
    config: str
    overrides: list[str]
    parent: list[str] | None = None  # None: from scratch; else the parent's overrides on parent_config
    parent_config: str = PARENT_CONFIG


# name -> variant; runs of one variant share their prepared data. The eng-mar CPU recipe on
# eng-hin (HINDI) is what configs/eng-hin-scratch.yaml ships, and with a parent, configs/eng-hin.yaml.
VARIANTS: dict[str, Variant] = {
    "scratch, the eng-mar CPU recipe": Variant(PARENT_CONFIG, HINDI),
    "scratch, regularised harder": Variant("configs/eng-hin-scratch.yaml", REGULARISED),
    "transfer, configs/eng-hin.yaml": Variant(PARENT_CONFIG, HINDI, parent=[]),
    "transfer, regularised harder": Variant("configs/eng-hin.yaml", [*PLAIN, *REGULARISED], parent=[]),
    "transfer, the parent's Marathi tokenizer too": Variant(
        "configs/eng-hin.yaml", [*PLAIN, "tokenizer.parent_vocab=parent"], parent=[]
    ),
    "eng-mar continued on its own data": Variant(
        PARENT_CONFIG, ["train.learning_rate=0.0005", "train.lr_hold=0.0"], parent=[]
    ),
    # round 3 ships Luong without input feeding; the eng-hin recipes with it, as they were measured first
    "scratch, with input feeding (before)": Variant(PARENT_CONFIG, [*HINDI, *FEEDING]),
    "transfer, with input feeding (before)": Variant(PARENT_CONFIG, [*HINDI, *FEEDING], parent=FEEDING),
    # the child adds input feeding to the shipped parent's fast decoder (its fed inputs start at zero)
    "transfer, input feeding added to the parent": Variant(PARENT_CONFIG, [*HINDI, *FEEDING], parent=[]),
    # the Transformer (docs/transformer.md): configs/eng-mar-transformer.yaml on eng-hin, from scratch
    # and as the child of that recipe trained on eng-mar, beside the RNN's shipped scratch recipe
    "scratch, configs/eng-hin-scratch.yaml": Variant("configs/eng-hin-scratch.yaml", []),
    "transformer, scratch": Variant(TRANSFORMER, [*PRE_NORM, *UNGUIDED, *HINDI]),  # as measured
    "transformer, from a Transformer parent": Variant(
        TRANSFORMER, [*PRE_NORM, *UNGUIDED, *HINDI], parent=[*PRE_NORM, *UNGUIDED], parent_config=TRANSFORMER
    ),
    # mixed fine-tuning (docs/small-data.md): the parent continues on eng-hin beside eng-mar, tagged
    "mixed fine-tuning, eng-hin x6 beside eng-mar": Variant(
        "configs/eng-hin.yaml", [*PLAIN, *RELATED, "data.oversample=6"], parent=[]
    ),
    "mixed fine-tuning, eng-hin x12 beside eng-mar": Variant(
        "configs/eng-hin.yaml", [*PLAIN, *RELATED, "data.oversample=12"], parent=[]
    ),
    "mixed fine-tuning, eng-hin x3 beside 3,000 eng-mar pairs": Variant(
        "configs/eng-hin.yaml", [*PLAIN, *RELATED, "data.oversample=3", "data.related_pairs=3000"], parent=[]
    ),
}


def slug(name: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in name).strip("-")


def main(argv: list[str] | None = None) -> int:
    parser = study_arguments(__doc__, list(VARIANTS), "runs/transfer", "docs/transfer", "cpu")
    parser.add_argument("--report", action="store_true", help="print the table and the outputs; train nothing")
    args = parser.parse_args(argv)
    if args.check:
        return check_variants([(name, v.config, v.overrides) for name, v in VARIANTS.items()])
    device = prepare_device(args.device)
    results_path = Path(args.out) / "results.json"
    results = results_so_far(results_path)
    if args.report:
        print(table(results, list(results), args.minutes))
        print(side_by_side(results, [n for n in results if not n.startswith("eng-mar")], args.runs))
        return 0
    parents = Path(args.runs) / "parents"  # shared by every transfer variant: one parent per seed
    for name in args.variants:
        runs = Path(args.runs) / slug(name)
        measure = partial(child_of_its_parent, VARIANTS[name], args.minutes, runs, parents, device)
        measure_seeds(name, args.seeds, measure, results, results_path)
    print(table(results, [n for n in VARIANTS if n in results], args.minutes))
    return 0


def child_of_its_parent(variant: Variant, minutes: float, runs: Path, parents: Path, device, seed: int) -> dict:
    """The variant trained with ``seed`` (a transfer variant after its parent of the same seed) and scored."""
    overrides = variant.overrides
    if variant.parent is not None:
        print(f"   its parent, seed {seed}", file=sys.stderr, flush=True)
        if variant.parent_config != PARENT_CONFIG:  # parents of another recipe: a folder of their own
            parents = parents.with_name(f"parents-{Path(variant.parent_config).stem}")
        parent = train_run(variant.parent_config, variant.parent, seed, minutes, parents, device)
        overrides = [*overrides, f"init_from={parent}"]
    return trained_and_scored(variant.config, overrides, [], minutes, runs, device, seed)


def side_by_side(results: dict, names: list[str], runs: str = "runs/transfer", count: int = 12) -> str:
    """The first ``count`` test sources, a reference, and each variant's (first seed's) output
    (every eng-hin variant has the same split: the sources decide it, not the tokenizers)."""
    prepared = sorted(Path(runs).glob("*/data*/test.multi.tsv"))  # any variant's: one split for all
    if not prepared:
        return f"(no prepared eng-hin test split under {runs})\n"
    test = read_references(prepared[0])
    lines = []
    for i in range(min(count, len(test.sources))):
        lines.append(f"- **{test.sources[i]}** — reference: {test.references[i][0]}")
        lines += [f"  - {name}: {results[name][0]['samples'][i]}" for name in names if name in results]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
