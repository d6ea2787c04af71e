#!/usr/bin/env python
"""Translation quality per CPU-minute: train recipe variants under one wall-clock budget,
with several seeds, and score each on the eng-mar test split (beam search, all references).

    python scripts/studies/quality.py --minutes 5 --seeds 1 2
    python scripts/studies/quality.py --minutes 5 --seeds 1 2 --variants baseline word-dropout-0.1

Every run trains until the budget (train.epochs is lifted to 1000; early stopping still
applies). A variant is training overrides (one run per seed) plus decoding overrides; variants that
share their training overrides share their runs, so a decoding lever costs no training.
Finished runs are reused (delete <runs>/<name>-seed<N> to redo one). Writes
<out>/results.json and prints a markdown table (BLEU, chrF, share of outputs repeating a
word, epochs reached, tokens/s, seed spread).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import statistics
import sys
from functools import partial
from pathlib import Path

from nmt.config.files import load_config
from nmt.config.paths import RunPaths, prepared_paths, run_paths
from nmt.core.device import prepare_device
from nmt.core.errors import NmtError
from nmt.core.fileio import write_text_atomic
from nmt.data.references import read_references
from nmt.decoding.scoring import repeated_word_share, score
from nmt.pipelines.prepare import prepare
from nmt.pipelines.translate import Translator
from nmt.runtime.checkpoint import average_newest
from nmt.runtime.loading import load_checkpoints
from nmt.training.launch import train
from nmt.training.metrics import MetricsFile

# name -> (training overrides, decoding overrides)
VARIANTS: dict[str, tuple[list[str], list[str]]] = {
    "baseline": ([], []),
    "baseline, no repeated span <= 2": ([], ["decode.no_repeat_span=2"]),
    "baseline, no repeated span <= 6": ([], ["decode.no_repeat_span=4"]),
    "baseline, coverage penalty 0.2, gnmt length": ([], ["decode.coverage_penalty=0.2", "decode.length_form=gnmt"]),
    "word dropout 0.1": (["train.word_dropout=0.1"], []),
    "label smoothing 0.1": (["train.label_smoothing=0.1"], []),
    "subword sampling 0.3": (["train.subword_sampling=0.3"], []),
    "weight average 0.999": (["train.ema_decay=0.999"], []),
    "tied embeddings": (["model.tie_embeddings=true"], []),
    "budget lr schedule": (["train.lr_schedule=budget"], []),
    "budget lr schedule, hold 0.7": (["train.lr_schedule=budget", "train.lr_hold=0.7"], []),
    "budget lr schedule, hold 0.7, no repeated span <= 6": (
        ["train.lr_schedule=budget", "train.lr_hold=0.7"],
        ["decode.no_repeat_span=4"],
    ),
    "budget lr schedule, word dropout 0.1": (["train.lr_schedule=budget", "train.word_dropout=0.1"], []),
}
# The second round: single levers on top of the first round's winner (hold, then decay).
HOLD = ["train.lr_schedule=budget", "train.lr_hold=0.7"]
WIDE = ["model.embed_dim=256", "model.encoder_hidden=256", "model.attention_dim=256", "model.output_dim=256"]
VARIANTS |= {
    "hold 0.7, weight average 0.999": ([*HOLD, "train.ema_decay=0.999"], []),
    "hold 0.7, label smoothing 0.1": ([*HOLD, "train.label_smoothing=0.1"], []),
    "hold 0.7, learning rate 0.003": ([*HOLD, "train.learning_rate=0.003"], []),
    "hold 0.7, batch 128, learning rate 0.003": ([*HOLD, "train.batch_size=128", "train.learning_rate=0.003"], []),
    "hold 0.7, luong order, input feeding": ([*HOLD, "model.attention=luong-concat", "model.input_feeding=true"], []),
    "hold 0.7, 256-wide model": ([*HOLD, *WIDE], []),
    "hold 0.7, tied embeddings": ([*HOLD, "model.tie_embeddings=true"], []),
}
# The third round: the 256-wide model (the second round's winner) with one more lever each.
WIDE_HOLD = [*HOLD, *WIDE]
VARIANTS |= {
    "256-wide, hold 0.7, weight average 0.999": ([*WIDE_HOLD, "train.ema_decay=0.999"], []),
    "256-wide, hold 0.7, learning rate 0.003": ([*WIDE_HOLD, "train.learning_rate=0.003"], []),
    "256-wide, hold 0.7, vocabularies 4000": (
        [*WIDE_HOLD, "tokenizer.src_vocab_size=4000", "tokenizer.tgt_vocab_size=4000"],
        [],
    ),
    "256-wide, hold 0.7, luong order, input feeding": (
        [*WIDE_HOLD, "model.attention=luong-concat", "model.input_feeding=true"],
        [],
    ),
    "256-wide, hold 0.7, label smoothing 0.1": ([*WIDE_HOLD, "train.label_smoothing=0.1"], []),
    "256-wide, hold 0.7, tied embeddings": ([*WIDE_HOLD, "model.tie_embeddings=true"], []),
}

# The fourth round: both second-round winners together, with one more lever each.
LUONG_WIDE = [*WIDE_HOLD, "model.attention=luong-concat", "model.input_feeding=true"]
VARIANTS |= {
    "256-wide luong, bridge from both directions": ([*LUONG_WIDE, "model.bridge=both"], []),
    "256-wide luong, weight average 0.999": ([*LUONG_WIDE, "train.ema_decay=0.999"], []),
    "256-wide luong, learning rate 0.003": ([*LUONG_WIDE, "train.learning_rate=0.003"], []),
    "256-wide luong, learning rate 0.001": ([*LUONG_WIDE, "train.learning_rate=0.001"], []),
    "256-wide luong, vocabularies 4000": (
        [*LUONG_WIDE, "tokenizer.src_vocab_size=4000", "tokenizer.tgt_vocab_size=4000"],
        [],
    ),
    "256-wide luong, label smoothing 0.1": ([*LUONG_WIDE, "train.label_smoothing=0.1"], []),
}
VARIANTS |= {  # the stutter guard's span on the best of them (a Marathi word is often 5-7 pieces)
    f"256-wide luong, label smoothing 0.1, no repeated span <= {span}": (
        [*LUONG_WIDE, "train.label_smoothing=0.1"],
        [f"decode.no_repeat_span={span}"],
    )
    for span in (2, 4, 6, 8, 12)
}

# The chosen recipe: the fourth round's best levers together, no early stopping (the budget ends
# the run), the stutter guard in search. RECIPES names the config file that ships each one.
CHOSEN = ["train.label_smoothing=0.1", "train.patience=0"]
GUARD = ["decode.no_repeat_span=6"]
# The Transformer recipes' layers as every study before Marian's shape measured them (pre-norm,
# sin and cos side by side): a study of configs/eng-mar-transformer.yaml adds these to stay what it was
PRE_NORM = ["model.norm=pre", "model.positions=sinusoidal"]
# ... and without guided alignment, as every study of it measured it before the corpus's links (the
# shipped recipes train with it now: docs/alignment.md)
UNGUIDED = ["data.links=", "train.guided_alignment=0", "train.probe_alignment=0"]
HIDDEN_WIDTHS = ("encoder_hidden", "decoder_hidden", "attention_dim", "output_dim")  # all but embed_dim
RECIPE_25 = [*HOLD, "model.attention=luong-concat", "model.input_feeding=true", "train.learning_rate=0.002", *CHOSEN]
VARIANTS |= {
    "recipe: 256-wide luong, label smoothing 0.1, no repeated span <= 6": ([*LUONG_WIDE, *CHOSEN], GUARD),
    "recipe: luong, input feeding, hold 0.7, learning rate 0.002, label smoothing 0.1, no repeated span <= 6": (
        RECIPE_25,
        GUARD,
    ),
    # levers measured after the recipe was chosen, on top of it
    "recipe, label smoothing 0.2": ([*LUONG_WIDE, *CHOSEN, "train.label_smoothing=0.2"], GUARD),
    "recipe, encoder output dropout 0.2": ([*LUONG_WIDE, *CHOSEN, "model.encoder_output_dropout=0.2"], GUARD),
    # the cell: the CPU recipe (label smoothing 0.2, what configs/eng-mar-cpu.yaml ships) with an LSTM
    "recipe, label smoothing 0.2, LSTM": ([*LUONG_WIDE, *CHOSEN, "train.label_smoothing=0.2", "model.rnn=lstm"], GUARD),
    # the 25-minute recipe with the CPU config's vocabularies
    "recipe at 25 minutes, vocabularies 2000": (
        [*RECIPE_25, "tokenizer.src_vocab_size=2000", "tokenizer.tgt_vocab_size=2000"],
        GUARD,
    ),
    # 25 minutes: dev loss still falls at the end and dev BLEU stalls while the rate is held,
    # so the model is short of capacity or of annealing rather than over-fitting
    "recipe at 25 minutes, 384-wide": (
        [*RECIPE_25, *(f"model.{key}=384" for key in HIDDEN_WIDTHS)],
        GUARD,
    ),
    "recipe at 25 minutes, hold 0.5": ([*RECIPE_25, "train.lr_hold=0.5"], GUARD),
    "recipe at 25 minutes, dropout 0.2": ([*RECIPE_25, "model.dropout=0.2"], GUARD),
    "recipe at 25 minutes, hold 0.3": ([*RECIPE_25, "train.lr_hold=0.3"], GUARD),
    "recipe at 25 minutes, hold 0.3, tied embeddings": (
        [*RECIPE_25, "train.lr_hold=0.3", "model.tie_embeddings=true"],
        GUARD,
    ),
    # the hold-0.3 run's dev loss still falls in its last epoch: a lever that costs no speed
    "recipe at 25 minutes, hold 0.3, label smoothing 0.2": (
        [*RECIPE_25, "train.lr_hold=0.3", "train.label_smoothing=0.2"],
        GUARD,
    ),
}
# Round 3 (docs/quality.md), on the shipped recipe (--config configs/eng-mar-cpu.yaml): levers that
# are features rather than settings. A decoding lever shares the baseline's runs.
TEACHER = "runs/eng-mar-cpu"  # `bash scripts/main.sh`'s 5-minute model of the same split
VARIANTS |= {
    "MBR over 8 candidates, chrF": ([], ["decode.mbr=8"]),
    "MBR over 8 candidates, BLEU": ([], ["decode.mbr=8", "decode.mbr_utility=bleu"]),
    "MBR over 4 candidates, chrF": ([], ["decode.mbr=4"]),
    "two members side by side, one thread each": (["train.members=2"], []),
    "two members side by side, MBR over 8 candidates, chrF": (["train.members=2"], ["decode.mbr=8"]),
    # stronger regularisation (Sennrich & Zhang, 2019), on the single model and on the members
    "dropout 0.4, label smoothing 0.3": (["model.dropout=0.4", "train.label_smoothing=0.3"], []),
    "two members, dropout 0.4, label smoothing 0.3": (
        ["train.members=2", "model.dropout=0.4", "train.label_smoothing=0.3"],
        [],
    ),
    "distilled from the 5-minute model": ([f"data.distill_from={TEACHER}"], []),
    "distilled from the 5-minute model, human pairs kept": ([f"data.distill_from={TEACHER}", "data.distill=add"], []),
}
# The decay phase's checkpoints, averaged (`nmt average`) or ensembled: a checkpoint every 100
# steps, the newest five kept. ``checkpoints:average:K`` / ``checkpoints:ensemble:K`` are not
# config keys but what evaluate_run loads instead of 'best'.
DECAY = ["train.checkpoint_every=100", "train.keep_checkpoints=5"]
VARIANTS |= {
    "checkpoints every 100 steps, best": (DECAY, []),
    "weights of the last 5 checkpoints averaged": (DECAY, ["checkpoints:average:5"]),
    "weights of the last 3 checkpoints averaged": (DECAY, ["checkpoints:average:3"]),
    "last 3 checkpoints ensembled": (DECAY, ["checkpoints:ensemble:3"]),
}  # joined pairs (train.concat_pairs) ran here too: the key was removed after commit e838812
# Round 3, third measurement (docs/quality.md): levers that buy more training in the budget (and a
# curriculum, train.curriculum_epochs, whose key was removed after commit e838812)
VARIANTS |= {
    "batch 128, learning rate 0.003": (["train.batch_size=128", "train.learning_rate=0.003"], []),
    "one model (on configs/eng-mar.yaml: its members off)": (["train.members=1"], []),
    # without input feeding the decoder's recurrence runs over the whole target in one call
    "no input feeding (the whole-sequence decoder)": (["model.input_feeding=false"], []),
}
# What round 3 measured as configs/eng-mar.yaml plus train.members=2, written on the base file
VARIANTS |= {
    "recipe at 25 minutes, hold 0.3, label smoothing 0.2, two members": (
        [*RECIPE_25, "train.lr_hold=0.3", "train.label_smoothing=0.2", "train.members=2"],
        GUARD,
    ),
}
# ... and the fourth measurement's winner on it: MBR over the members' 8-best, chrF as the utility
# (on the shipped file, which has it, "the beam's best" is the decoding measured before it)
MEMBERS_25, _ = VARIANTS["recipe at 25 minutes, hold 0.3, label smoothing 0.2, two members"]
VARIANTS |= {
    "recipe at 25 minutes, hold 0.3, label smoothing 0.2, two members, MBR over 8 candidates": (
        MEMBERS_25,
        [*GUARD, "decode.mbr=8"],
    ),
    "the beam's best (no MBR)": ([], ["decode.mbr=0"]),
}
# At 25 minutes the members win because each one's last epochs add little: does a third add more
# than each member's share of the two cores takes away? (members of run seed S have seeds S..S+N-1)
VARIANTS |= {
    "three members side by side": (["train.members=3"], []),
}
# A 5-minute run spends 4-5 % of its budget validating on all 1,111 dev sources; with no early
# stopping, the validations only pick the best checkpoint, and a sample frees that time for training
VARIANTS |= {
    "validation on 300 dev sources": (["train.validation_sentences=300"], []),
}
# The 5-minute recipe as round 3 ships it: the third measurement's winner on the recipe before
RECIPE_5, _ = VARIANTS["recipe, label smoothing 0.2"]
VARIANTS |= {
    "recipe, label smoothing 0.2, no input feeding": ([*RECIPE_5, "model.input_feeding=false"], GUARD),
}
RECIPES = {  # shipped config -> (the base it was measured from, its variant)
    "configs/eng-mar-cpu.yaml": (
        "configs/baseline/eng-mar-cpu.yaml",
        "recipe, label smoothing 0.2, no input feeding",
    ),
    "configs/eng-mar.yaml": (
        "configs/baseline/eng-mar.yaml",
        "recipe at 25 minutes, hold 0.3, label smoothing 0.2, two members, MBR over 8 candidates",
    ),
}


def folder_part(override: str) -> str:
    """An override as part of a folder name: one level, and plain text a config's YAML reads as a
    string (``data.related={mr: FILE}`` would read as a mapping)."""
    return re.sub(r"[^\w.,+-]", "_", override.replace("=", ""))


def prepared_dir(runs: Path, overrides: list[str]) -> Path:
    """Runs share prepared data unless they change the tokenizer, the data or the parent."""
    changes = [o for o in overrides if o.startswith(("tokenizer.", "data.", "init_from="))]
    return runs / "-".join(["data", *(folder_part(o.removeprefix("tokenizer.")) for o in changes)])


def train_run(base: str, overrides: list[str], seed: int, minutes: float, runs: Path, device) -> Path:
    key = "-".join(folder_part(o) for o in overrides) or "baseline"  # one folder level
    if len(key) > 245:  # a file name (key-seedN) holds 255 bytes: keep the start readable, hash the rest
        key = f"{key[:225]}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"
    run_dir = runs / f"{key}-seed{seed}"
    config = load_config(
        base,
        [
            *overrides,
            f"run_dir={run_dir}",
            f"data.prepared_dir={prepared_dir(runs, overrides)}",
            f"train.seed={seed}",
            f"train.max_minutes={minutes}",
            "train.epochs=1000",
        ],
    )
    if not (run_dir / "done").is_file():
        prepare(config, log=lambda _: None)
        train(config, device, resume=True, show_bar=False, log=lambda _: None)
        write_text_atomic(run_dir / "done", "")
    return run_dir


def epochs_reached(records: list[dict]) -> float:
    """Complete epochs, plus the share of a last one the budget cut short."""
    full = [r for r in records if not r.get("partial")]
    if not records or not records[-1].get("partial"):
        return float(len(full))
    steps_per_epoch = full[0]["step"] if full else None
    done_before = full[-1]["step"] if full else 0
    return len(full) + ((records[-1]["step"] - done_before) / steps_per_epoch if steps_per_epoch else 0.5)


def evaluate_run(
    base: str,
    run_dir: Path,
    train_overrides: list[str],
    decode_overrides: list[str],
    device,
    samples: int = 8,
    test_set: Path | None = None,
) -> dict:
    """The run scored on its own test split, or on ``test_set`` (another prepared split's
    ``test.multi.tsv``: runs of other splits compared on the same sentences)."""
    chosen = [o for o in decode_overrides if o.startswith("checkpoints:")]
    decode_overrides = [o for o in decode_overrides if o not in chosen]
    config = load_config(
        base,
        [
            *train_overrides,
            *decode_overrides,
            f"run_dir={run_dir}",
            f"data.prepared_dir={prepared_dir(run_dir.parent, train_overrides)}",
        ],
    )
    references = read_references(test_set or prepared_paths(config).multi("test"))
    hypotheses = Translator(load_checkpoints(config, checkpoints_to_load(run_dir, chosen), device)).translate(
        references.sources
    )
    scores = score(hypotheses, references.references, metrics=("bleu", "chrf"))
    run = run_paths(config)
    records = MetricsFile((run.member(1) if config.train.members > 1 else run).metrics).read()  # a member's pace
    return {
        "bleu": scores["bleu"],
        "chrf": scores["chrf"],
        "repeated_words": round(repeated_word_share(hypotheses), 2),
        "epochs": round(epochs_reached(records), 2),
        "tokens_per_s": round(statistics.fmean(r["tokens_per_s"] for r in records), 1) if records else 0.0,
        "best_dev_bleu": max((r["dev_bleu"] for r in records), default=0.0),
        # seconds since the run started (validations included) and dev BLEU at each validation
        "dev_curve": [[r["elapsed_seconds"], r["dev_bleu"]] for r in records if "elapsed_seconds" in r],
        "beam_size": config.decode.beam_size,
        "signature": scores["signature"]["bleu"],
        "samples": hypotheses[:samples],
    }


def checkpoints_to_load(run_dir: Path, chosen: list[str]) -> list[str]:
    """'best', or the newest K step checkpoints averaged into one (``checkpoints:average:K``)
    or ensembled (``checkpoints:ensemble:K``)."""
    if not chosen:
        return ["best"]
    _, how, count = chosen[0].split(":")
    run = RunPaths(run_dir)
    if how == "ensemble":
        return [str(path) for path in run.step_checkpoints()[-int(count) :]]
    averaged = run.checkpoints / f"averaged-{count}.pt"
    average_newest(run, int(count), averaged)
    return [str(averaged)]


def table(results: dict, names: list[str], minutes: float) -> str:
    lines = [
        f"| recipe ({minutes:g} min of training) | test BLEU | chrF | repeated words % | epochs | tokens/s "
        "| BLEU per seed |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for name in names:
        rows = results[name]
        mean = {
            k: statistics.fmean(r[k] for r in rows)
            for k in ("bleu", "chrf", "repeated_words", "epochs", "tokens_per_s")
        }
        seeds = " / ".join(f"{r['bleu']:.2f}" for r in rows)
        lines.append(
            f"| {name} | **{mean['bleu']:.2f}** | {mean['chrf']:.2f} | {mean['repeated_words']:.1f} | "
            f"{mean['epochs']:.1f} | {mean['tokens_per_s']:,.0f} | {seeds} |"
        )
    return "\n".join(lines) + "\n"


def study_arguments(description: str, variants: list[str], runs: str, out: str, device: str):
    """The options every quality study takes (budget, seeds, variants, where runs and results go)."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=5.0, help="training budget per run")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--variants", nargs="+", default=variants, choices=variants)
    parser.add_argument("--runs", default=runs, help="where the runs go")
    parser.add_argument("--out", default=out, help="where results.json goes")
    parser.add_argument("--device", default=device)
    parser.add_argument(
        "--check", action="store_true", help="load every variant's config against today's package; train nothing"
    )
    return parser


def check_variants(configs: list[tuple[str, str, list[str]]]) -> int:
    """(name, base config, overrides) of each variant, loaded as a run would load it: a key the
    package no longer has (or a value it refuses) is named with its variant. Returns the exit status."""
    failed = 0
    for name, base, overrides in configs:
        try:
            load_config(base, [o for o in overrides if not o.startswith("checkpoints:")])
        except NmtError as error:
            print(f"{name}: {error}", file=sys.stderr)
            failed += 1
    print(f"{len(configs) - failed} of {len(configs)} variants load")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = study_arguments(__doc__, list(VARIANTS), "runs/quality", "docs/quality", "auto")
    parser.add_argument("--config", default="configs/baseline/eng-mar-cpu.yaml", help="the recipe variants start from")
    args = parser.parse_args(argv)
    if args.check:
        return check_variants([(name, args.config, [*train, *decode]) for name, (train, decode) in VARIANTS.items()])
    device = prepare_device(args.device)
    runs = Path(args.runs) / f"{Path(args.config).stem}-{args.minutes:g}min"
    results_path = Path(args.out) / f"results-{Path(args.config).stem}-{args.minutes:g}min.json"
    results = results_so_far(results_path)
    for name in args.variants:
        train_overrides, decode_overrides = VARIANTS[name]
        measure = partial(
            trained_and_scored, args.config, train_overrides, decode_overrides, args.minutes, runs, device, samples=8
        )
        measure_seeds(name, args.seeds, measure, results, results_path)
    print(table(results, [n for n in VARIANTS if n in results], args.minutes))
    return 0


def trained_and_scored(
    config: str,
    overrides: list[str],
    decode_overrides: list[str],
    minutes: float,
    runs: Path,
    device,
    seed: int,
    samples: int = 12,
    test_set: Path | None = None,
) -> dict:
    """One run of ``config`` with ``overrides`` and ``seed`` (reused when done), scored on its test
    set or on ``test_set``."""
    run_dir = train_run(config, overrides, seed, minutes, runs, device)
    return evaluate_run(config, run_dir, overrides, decode_overrides, device, samples=samples, test_set=test_set)


def results_so_far(results_path: Path) -> dict:
    """A study's results.json as measured so far (a variant's rows, by name), or none yet."""
    return json.loads(results_path.read_text(encoding="utf-8")) if results_path.is_file() else {}


def measure_seeds(name: str, seeds: list[int], measure, results: dict, results_path: Path) -> None:
    """Variant ``name`` with each seed (``measure(seed)``: its result row), beside the rows of
    other seeds measured before; results.json written after each variant."""
    rows = [row for row in results.get(name, []) if row["seed"] not in seeds]  # other seeds' runs stay
    for seed in seeds:
        print(f"== {name}, seed {seed}", file=sys.stderr, flush=True)
        rows.append({"seed": seed, **measure(seed)})
        print(f"   test BLEU {rows[-1]['bleu']:.2f}, chrF {rows[-1]['chrf']:.2f}", file=sys.stderr, flush=True)
    results[name] = sorted(rows, key=lambda row: row["seed"])
    write_text_atomic(results_path, json.dumps(results, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    sys.exit(main())
