#!/usr/bin/env python
"""The Transformer beside the RNN on eng-mar: recipe variants of each family under one wall-clock
budget, with several seeds, scored on the same test split (beam search, all references).

    python scripts/studies/transformer.py --minutes 5 --seeds 1 2
    python scripts/studies/transformer.py --minutes 5 --seeds 1 --variants "transformer recipe" "2 + 2 layers"

A variant is a base config (the RNN's configs/eng-mar-cpu.yaml or the Transformer's
configs/eng-mar-transformer.yaml) and overrides. Runs, reuse and scoring are quality.py's: each
family's runs share one prepared copy of the data (both configs split and segment alike), and a
finished run is reused. Writes <out>/results-<minutes>min.json and prints a markdown table.
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

from quality import check_variants, measure_seeds, study_arguments, table, trained_and_scored

from nmt.core.device import select_device

RNN = "configs/eng-mar-cpu.yaml"
TRANSFORMER = "configs/eng-mar-transformer.yaml"

# name -> (base config, training overrides, decoding overrides)
VARIANTS: dict[str, tuple[str, list[str], list[str]]] = {
    "rnn recipe": (RNN, [], []),
    "transformer recipe": (TRANSFORMER, [], []),
    # the first screening, one lever each on the Transformer recipe
    "2 + 2 layers, feed-forward 512": (
        TRANSFORMER,
        ["model.encoder_layers=2", "model.decoder_layers=2", "model.ff_dim=512"],
        [],
    ),
    "learning rate 0.002": (TRANSFORMER, ["train.learning_rate=0.002"], []),
    "inverse_sqrt schedule, warm-up 300": (TRANSFORMER, ["train.lr_schedule=inverse_sqrt"], []),
    "dropout 0.1": (TRANSFORMER, ["model.dropout=0.1"], []),
    "batch 128, learning rate 0.002": (TRANSFORMER, ["train.batch_size=128", "train.learning_rate=0.002"], []),
}


def main(argv: list[str] | None = None) -> int:
    parser = study_arguments(__doc__, list(VARIANTS), "runs/transformer-study", "docs/transformer", "auto")
    args = parser.parse_args(argv)
    if args.check:
        return check_variants([(name, base, [*train, *decode]) for name, (base, train, decode) in VARIANTS.items()])
    device = select_device(args.device)
    results_path = Path(args.out) / f"results-{args.minutes:g}min.json"
    results = json.loads(results_path.read_text(encoding="utf-8")) if results_path.is_file() else {}
    for name in args.variants:
        base, train_overrides, decode_overrides = VARIANTS[name]
        runs = Path(args.runs) / f"{Path(base).stem}-{args.minutes:g}min"
        measure = partial(
            trained_and_scored, base, train_overrides, decode_overrides, args.minutes, runs, device, samples=8
        )
        measure_seeds(name, args.seeds, measure, results, results_path)
    print(table(results, [n for n in VARIANTS if n in results], args.minutes))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
