#!/usr/bin/env python
"""Levers for a small corpus, on the 2,549-pair English-Hindi export (docs/small-data.md, third,
fifth and sixth measurements).

    bash scripts/main.sh                          # the parent: runs/eng-mar-cpu (not in any budget)
    python scripts/small_data.py --seeds 1 2 3    # every variant below, with each seed
    python scripts/small_data.py --report         # the table and a dozen outputs side by side

Every variant is ``configs/eng-hin.yaml`` plus overrides, started from the one parent a user
already has after ``bash scripts/main.sh`` (``--parent``), trained with each seed under its
budget (5 minutes unless it says otherwise) and scored on the eng-hin test split (beam 5, all
references) with the helpers of scripts/quality.py. Unlike scripts/transfer.py (a parent per
seed), the parent is fixed: the seeds measure the children's spread. The variants that end in
"one thread" are a screening: two of them trained side by side, a thread each. Finished runs
are reused. Writes OUT/results.json.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from quality import measure_seeds, study_arguments, table, trained_and_scored
from transfer import ONE_CHILD, PLAIN, side_by_side  # PLAIN: every variant the third measurement trained

from nmt.core.device import select_device

CONFIG = "configs/eng-hin.yaml"
RELATED = ["data.related={mr: data/eng-mar/mar.txt}"]  # one model for Hindi and Marathi, sources tagged
MIXED = [*RELATED, "data.oversample=3", "train.related_per_epoch=3000", "train.related_until=0.6"]
ONE_THREAD = ["train.threads=1"]


@dataclass(frozen=True)
class Variant:
    overrides: list[str]
    minutes: float = 5.0


VARIANTS: dict[str, Variant] = {
    "transfer (configs/eng-hin.yaml of the third measurement)": Variant(PLAIN),
    "transfer, the encoder frozen": Variant([*PLAIN, "train.freeze=[encoder]"]),
    "transfer, EMA of the weights (0.998)": Variant([*PLAIN, "train.ema_decay=0.998"]),
    # mixed fine-tuning: the parent continues on the pair beside Marathi, its vocabularies extended
    "mixed, Hindi x3 beside a fixed sample of 3,000 eng-mar pairs": Variant(
        [*PLAIN, *RELATED, "data.oversample=3", "data.related_pairs=3000"]
    ),
    "mixed, 3,000 eng-mar pairs drawn afresh an epoch, the pair alone after 60 % (configs/eng-hin-mixed.yaml)": (
        Variant([*PLAIN, *MIXED])
    ),
    "transfer, four children ensembled, 25 minutes, MBR over 8 (configs/eng-hin-25min.yaml)": Variant(
        [*PLAIN, "train.members=4", "decode.mbr=8"], minutes=25.0
    ),
    # the screening: pairs of these trained side by side, one thread each
    "transfer, one thread": Variant([*PLAIN, *ONE_THREAD]),
    "transfer, an 800-piece Hindi vocabulary, one thread": Variant(
        [*PLAIN, *ONE_THREAD, "tokenizer.tgt_vocab_size=800"]
    ),
    "mixed (configs/eng-hin-mixed.yaml), one thread": Variant([*PLAIN, *ONE_THREAD, *MIXED]),
    "mixed, the pair alone after 40 %, one thread": Variant([*PLAIN, *ONE_THREAD, *MIXED, "train.related_until=0.4"]),
    "mixed, 6,000 eng-mar pairs an epoch, one thread": Variant(
        [*PLAIN, *ONE_THREAD, *MIXED, "train.related_per_epoch=6000"]
    ),
    "mixed, 1,000 eng-mar pairs an epoch, Hindi x2, one thread": Variant(
        [*PLAIN, *ONE_THREAD, *MIXED, "train.related_per_epoch=1000", "data.oversample=2"]
    ),
    # the fifth measurement: the lexical model (Nguyen & Chiang, 2018) in the child's decoder
    "transfer with the lexical model (configs/eng-hin.yaml of the fifth measurement)": Variant(ONE_CHILD),
    "transfer with the lexical model, four children ensembled, 25 minutes, MBR over 8": Variant(
        ["train.members=4", "decode.mbr=8"], minutes=25.0
    ),
    # the sixth measurement: four children in the 5 minutes of one
    "transfer with the lexical model, four children ensembled, MBR over 8 (configs/eng-hin.yaml)": Variant([]),
    "transfer, four children ensembled, MBR over 8": Variant([*PLAIN, "train.members=4", "decode.mbr=8"]),
    "transfer, two children with the lexical model ensembled, MBR over 8": Variant(["train.members=2"]),
    "transfer, eight children ensembled, 25 minutes, MBR over 8": Variant(
        [*PLAIN, "train.members=8", "decode.mbr=8"], minutes=25.0
    ),
}

# The shipped configs and the variant each one is (tests/test_shipped_configs.py holds them to it).
RECIPES = {
    "configs/eng-hin.yaml": next(name for name in VARIANTS if "(configs/eng-hin.yaml)" in name),
    "configs/eng-hin-mixed.yaml": next(name for name in VARIANTS if "configs/eng-hin-mixed.yaml" in name),
    "configs/eng-hin-25min.yaml": next(name for name in VARIANTS if "configs/eng-hin-25min.yaml" in name),
}


def main(argv: list[str] | None = None) -> int:
    parser = study_arguments(__doc__, list(VARIANTS), "runs/small-data", "docs/small-data", "cpu")
    parser.add_argument("--parent", default="runs/eng-mar-cpu", help="the parent run (bash scripts/main.sh)")
    parser.add_argument("--report", action="store_true", help="print the table and the outputs; train nothing")
    args = parser.parse_args(argv)
    results_path = Path(args.out) / "results.json"
    results = json.loads(results_path.read_text(encoding="utf-8")) if results_path.is_file() else {}
    if args.report:
        print(table(results, list(results), args.minutes))
        print(side_by_side(results, list(results), args.runs))
        return 0
    if not (Path(args.parent) / "checkpoints" / "best.pt").is_file():
        print(f"No parent at {args.parent}: run `bash scripts/main.sh` first.", file=sys.stderr)
        return 1
    device = select_device(args.device)
    for name in args.variants:
        variant = VARIANTS[name]
        overrides = [*variant.overrides, f"init_from={args.parent}"]
        runs = Path(args.runs) / str(list(VARIANTS).index(name))
        measure = partial(trained_and_scored, CONFIG, overrides, [], variant.minutes, runs, device)
        measure_seeds(name, args.seeds, measure, results, results_path)
    print(table(results, [n for n in VARIANTS if n in results], args.minutes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
