#!/usr/bin/env python
"""Levers for a small corpus, on the 2,549-pair English-Hindi export (docs/small-data.md, third
to eleventh measurements).

    bash scripts/main.sh                          # the parent: runs/eng-mar-cpu (not in any budget)
    python scripts/studies/small_data.py --seeds 1 2 3    # every variant below, with each seed
    python scripts/studies/small_data.py --report         # the table and a dozen outputs side by side

Every variant is ``configs/eng-hin.yaml`` plus overrides, started from the one parent a user
already has after ``bash scripts/main.sh`` (``--parent``), trained with each seed under its
budget (5 minutes unless it says otherwise) and scored on the eng-hin test split (beam 5, all
references) with the helpers of scripts/studies/quality.py. Unlike scripts/studies/transfer.py (a parent per
seed), the parent is fixed: the seeds measure the children's spread (a variant that names
another parent says so, and how that parent is made). The variants that end in
"one thread" are a screening: two of them trained side by side, a thread each. Finished runs
are reused. Writes OUT/results.json.
"""

from __future__ import annotations

import random
import sys
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from quality import (
    check_variants,
    measure_seeds,
    prepared_dir,
    results_so_far,
    study_arguments,
    table,
    trained_and_scored,
)
from transfer import ONE_CHILD, PLAIN, side_by_side  # PLAIN: every variant the third measurement trained

from nmt.config.files import load_config
from nmt.core.device import prepare_device
from nmt.pipelines.prepare import prepare
from nmt.runtime.loading import trained_weights_files

CONFIG = "configs/eng-hin.yaml"
RELATED = ["data.related={mr: data/eng-mar/mar.txt}"]  # one model for Hindi and Marathi, sources tagged
MIXED = [*RELATED, "data.oversample=3", "train.related_per_epoch=3000", "train.related_until=0.6"]
ONE_THREAD = ["train.threads=1"]
FOUR_PLAIN_CHILDREN = [*PLAIN, "train.members=4", "decode.mbr=8"]  # ensembled, MBR over 8 (configs/eng-hin-25min.yaml)
STRONG_PARENT = "runs/eng-mar/member-1"  # configs/eng-mar.yaml's first member (25 minutes, 4,000 pieces a side)
# runs/eng-mar-cpu continued 5 minutes on its own data (docs/transfer.md): the same architecture, trained longer
CONTINUED_PARENT = "runs/eng-mar-cpu-10min"
TEACHER = "runs/eng-hin"  # `nmt prepare` and `nmt train --config configs/eng-hin.yaml`
SYNTHETIC = Path("runs/small-data/eng-mar-english-3000.txt")  # written by synthetic_sample()
SELF_TRAINING_TEACHER = [f"data.distill_from={TEACHER}", "data.distill=keep"]
SELF_TRAINING = [*SELF_TRAINING_TEACHER, f"data.synthetic_from={SYNTHETIC}"]
# The tenth measurement's word lists (data.lexicon) and the eleventh's chosen, noisy self-training
# pairs (data.synthetic_keep, data.synthetic_noise) measured as losses, and the keys were removed
# after commit e838812: check that commit out to run those variants again.


@dataclass(frozen=True)
class Variant:
    overrides: list[str]
    minutes: float = 5.0
    parent: str = ""  # another parent than --parent's, e.g. a member of configs/eng-mar.yaml's run
    # dev sources carved from the pair (the test split is carved first, the same whatever this is):
    # 200 up to the seventh measurement, 50 from the eighth on (the rest train)
    dev_size: int = 200
    test_size: int = 400  # test sources, carved first: the first 200 of the 400 with test_size 200
    # another variant whose test split scores this one's runs (the runs of the first variant that
    # trains the same way are reused): recipes of two splits compared on the same sentences
    scored_on: str = ""

    @property
    def config_overrides(self) -> list[str]:
        """What the variant sets on CONFIG, its dev and test sets' sizes included."""
        return [*self.overrides, f"data.dev_size={self.dev_size}", f"data.test_size={self.test_size}"]


# Recipes that several measurements name (the ninth scores the eighth's runs on its own test split
# too)
LEXICAL_FOUR = "transfer with the lexical model, four children ensembled, MBR over 8"
PLAIN_FOUR_25 = "transfer, four children ensembled, 25 minutes, MBR over 8"
EIGHTH = f"{LEXICAL_FOUR}, 50 dev sources (configs/eng-hin.yaml)"
EIGHTH_25 = f"{PLAIN_FOUR_25}, 50 dev sources (configs/eng-hin-25min.yaml)"
ELEVENTH_DISTILLED = (
    "transfer, four children ensembled, the teacher's translations of the training sources beside the human pairs, "
    "18 minutes, MBR over 8, 50 dev sources"
)
NINTH = f"{LEXICAL_FOUR}, 50 dev and 200 test sources"
NINTH_25 = f"{PLAIN_FOUR_25}, 50 dev and 200 test sources"
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
    f"{PLAIN_FOUR_25} (configs/eng-hin-25min.yaml of the third measurement)": Variant(
        FOUR_PLAIN_CHILDREN, minutes=25.0
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
    f"{LEXICAL_FOUR} (configs/eng-hin.yaml of the sixth measurement)": Variant([]),
    "transfer, four children ensembled, MBR over 8": Variant(FOUR_PLAIN_CHILDREN),
    "transfer, two children with the lexical model ensembled, MBR over 8": Variant(["train.members=2"]),
    "transfer, eight children ensembled, 25 minutes, MBR over 8": Variant(
        [*PLAIN, "train.members=8", "decode.mbr=8"], minutes=25.0
    ),
    # the seventh measurement: a stronger parent (`nmt prepare` and `nmt train --config
    # configs/eng-mar.yaml`: 25 minutes, two members; its architecture has input feeding)
    "transfer with the lexical model, four children of the 25-minute parent's first member, MBR over 8": Variant(
        ["model.input_feeding=true"], parent=STRONG_PARENT
    ),
    "transfer with the lexical model, four children of the 5-minute parent continued 5 minutes, MBR over 8": Variant(
        [], parent=CONTINUED_PARENT
    ),
    # self-training inside 25 minutes: configs/eng-hin.yaml's run by its own commands (5 minutes)
    # translates 3,000 of eng-mar's English sentences (51 s), and four plain children train on them
    # beside the human pairs for the 18 minutes left
    "self-training from configs/eng-hin.yaml's run, 3,000 sentences, four children, 18 minutes, MBR over 8": Variant(
        [*FOUR_PLAIN_CHILDREN, *SELF_TRAINING], minutes=18.0
    ),
    # the eighth measurement: 50 dev sources instead of 200, the other 150 (171 pairs) trained on
    EIGHTH: Variant([], dev_size=50),
    EIGHTH_25: Variant(FOUR_PLAIN_CHILDREN, minutes=25.0, dev_size=50),
    # the ninth measurement: six children instead of four; 200 test sources instead of 400, the
    # other 200 (dev's 50 among them) trained on, every recipe scored on those 200 sources
    "transfer with the lexical model, six children ensembled, MBR over 8, 50 dev sources": Variant(
        ["train.members=6"], dev_size=50
    ),
    f"{LEXICAL_FOUR}, 50 dev sources, learning rate 0.003": Variant(["train.learning_rate=0.003"], dev_size=50),
    NINTH: Variant([], dev_size=50, test_size=200),
    f"{EIGHTH}, scored on the 200 test sources": Variant([], dev_size=50, scored_on=NINTH),
    NINTH_25: Variant(FOUR_PLAIN_CHILDREN, minutes=25.0, dev_size=50, test_size=200),
    f"{EIGHTH_25}, scored on the 200 test sources": Variant(
        FOUR_PLAIN_CHILDREN, minutes=25.0, dev_size=50, scored_on=NINTH_25
    ),
    # the eleventh measurement: the teacher's translations of the pair's own sources beside the
    # human pairs (Kim & Rush's sequence-level distillation of an ensemble, data.distill: add)
    ELEVENTH_DISTILLED: Variant(
        [*FOUR_PLAIN_CHILDREN, f"data.distill_from={TEACHER}", "data.distill=add"], minutes=18.0, dev_size=50
    ),
}

# The shipped configs and the variant each one is (nmt/recipes.yaml records what they measured).
RECIPES = {
    config: next(name for name in VARIANTS if name.endswith(f"({config})"))
    for config in ("configs/eng-hin.yaml", "configs/eng-hin-mixed.yaml", "configs/eng-hin-25min.yaml")
}


def main(argv: list[str] | None = None) -> int:
    parser = study_arguments(__doc__, list(VARIANTS), "runs/small-data", "docs/small-data", "cpu")
    parser.add_argument("--parent", default="runs/eng-mar-cpu", help="the parent run (bash scripts/main.sh)")
    parser.add_argument("--report", action="store_true", help="print the table and the outputs; train nothing")
    args = parser.parse_args(argv)
    if args.check:
        return check_variants(
            [(n, CONFIG, [*v.config_overrides, f"init_from={args.parent}"]) for n, v in VARIANTS.items()]
        )
    results_path = Path(args.out) / "results.json"
    results = results_so_far(results_path)
    if args.report:
        print(table(results, list(results), args.minutes))
        print(side_by_side(results, list(results), args.runs))
        return 0
    missing = [parent for parent in parents(args) if not (Path(parent) / "checkpoints" / "best.pt").is_file()]
    if missing:
        how = "`bash scripts/main.sh` (runs/eng-mar-cpu), or the commands of docs/small-data.md's seventh measurement,"
        print(f"No parent at {', '.join(missing)}: run {how} first.", file=sys.stderr)
        return 1
    if any(f"data.distill_from={TEACHER}" in VARIANTS[name].config_overrides for name in args.variants):
        if not all(best.is_file() for best in trained_weights_files(Path(TEACHER))):  # distill's own test
            print(f"No teacher at {TEACHER}: train configs/eng-hin.yaml by its own commands first.", file=sys.stderr)
            return 1
        for path, count in ((SYNTHETIC, 3000),):
            if any(f"data.synthetic_from={path}" in VARIANTS[name].overrides for name in args.variants):
                synthetic_sample(path, count)
    device = prepare_device(args.device)
    for name in args.variants:
        variant = VARIANTS[name]
        runs, overrides = training_of(name, args)
        test_set = test_split_of(variant.scored_on, args) if variant.scored_on else None
        measure = partial(trained_and_scored, CONFIG, overrides, [], variant.minutes, runs, device, test_set=test_set)
        measure_seeds(name, args.seeds, measure, results, results_path)
    print(table(results, [n for n in VARIANTS if n in results], args.minutes))
    return 0


def training_of(name: str, args) -> tuple[Path, list[str]]:
    """Where variant ``name``'s runs go and what they set on CONFIG: the folder of the first
    variant that trains the same way (a variant scored on another split reuses its runs)."""
    variant = replace(VARIANTS[name], scored_on="")
    first = next(other for other in VARIANTS if replace(VARIANTS[other], scored_on="") == variant)
    return Path(args.runs) / str(list(VARIANTS).index(first)), [
        *variant.config_overrides,
        f"init_from={variant.parent or args.parent}",
    ]


def test_split_of(name: str, args) -> Path:
    """Variant ``name``'s test split (prepared first when its runs have not been)."""
    runs, overrides = training_of(name, args)
    data = prepared_dir(runs, overrides)
    if not (data / "test.multi.tsv").is_file():
        # a run_dir of its own: CONFIG's (runs/eng-hin, the teacher) may hold a trained model
        settings = [*overrides, f"data.prepared_dir={data}", f"run_dir={runs / 'test-split'}"]
        prepare(load_config(CONFIG, settings), log=lambda _: None)
    return data / "test.multi.tsv"


def synthetic_sample(path: Path, count: int, seed: int = 7) -> None:
    """``path``: the first ``count`` distinct English sentences of eng-mar in a seeded order (the
    teacher leaves out those of the eng-hin dev and test sets)."""
    lines = Path("data/eng-mar/mar.txt").read_text(encoding="utf-8").splitlines()
    english = list(dict.fromkeys(line.split("\t", 1)[0].strip() for line in lines if line.strip()))
    random.Random(seed).shuffle(english)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(english[:count]) + "\n", encoding="utf-8")


def parents(args) -> list[str]:
    """The parents the chosen variants start from."""
    return sorted({VARIANTS[name].parent or args.parent for name in args.variants})


if __name__ == "__main__":
    sys.exit(main())
