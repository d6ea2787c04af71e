#!/usr/bin/env python
"""Mixed members on eng-mar: the RNN recipe and the Transformer recipe trained side by side in one
budget, one thread each (as train.members shares a machine's cores), then exported as packages
and translated as one ensemble (`nmt translate --model RNN --model TRANSFORMER`: an ensemble takes
models of any family that share their SentencePiece models) — beside each member alone and the
Transformer alone with the machine's threads, the same budget and seed. Then the pair of seed 1 as
one teacher (Kim & Rush 2016): the Transformer recipe trained in the same budget on the human pairs
and the pair's translations of their sources (`data.distill_from: [RNN, TRANSFORMER]` packages,
`data.distill: add`; eflomal links the pairs for guided alignment, the shipped links being the
human pairs' only), scored on the members' test split: one model every export takes.

    python scripts/studies/mixed_members.py --minutes 25 --seeds 1 2

Both configs split and segment eng-mar alike, so the runs share one prepared copy of the data
(prepared once, before the two trainings start) and their packages one pair of SentencePiece
models. Runs are quality.py's (reused when done); each member's process pins train.threads: 1.
Writes <out>/results-mixed-<minutes>min.json and prints a markdown table.
"""

from __future__ import annotations

import multiprocessing
import statistics
import sys
from functools import partial
from pathlib import Path

from quality import (
    check_variants,
    evaluate_run,
    measure_seeds,
    prepared_dir,
    results_so_far,
    study_arguments,
    trained_and_scored,
)

from nmt.config.files import load_config
from nmt.config.paths import prepared_paths
from nmt.core.device import prepare_device
from nmt.core.fileio import write_text_atomic
from nmt.data.references import read_references
from nmt.decoding.scoring import score
from nmt.export.package import export_model
from nmt.pipelines.prepare import prepare
from nmt.pipelines.translate import Translator
from nmt.runtime.loading import load_torch_packages
from nmt.training.launch import train

RNN = "configs/eng-mar-cpu.yaml"
TRANSFORMER = "configs/eng-mar-transformer.yaml"
ONE_THREAD = ["train.threads=1"]  # a member's share of a 2-core machine
MEMBERS = {"rnn": RNN, "transformer": TRANSFORMER}
MIXED = "an RNN and a Transformer side by side, one thread each, ensembled"
MEMBER_ALONE = {"its RNN member alone": "rnn", "its Transformer member alone": "transformer"}
DISTILLED = "the pair of seed 1 distilled into one Transformer (the human pairs and its translations)"
TEACHER_SEED = 1  # one teacher for every student seed, as Kim & Rush's


def distilled_overrides(runs: Path) -> list[str]:
    """The Transformer recipe taught by the mixed pair of TEACHER_SEED (its members' packages)."""
    teachers = ", ".join(str(runs / f"{family}-member-seed{TEACHER_SEED}-package") for family in MEMBERS)
    return [f"data.distill_from=[{teachers}]", "data.distill=add", "data.links="]


VARIANTS = {  # name -> (base config, overrides): what --check loads
    "the Transformer alone": (TRANSFORMER, []),
    MIXED: (TRANSFORMER, ONE_THREAD),
    **{name: (MEMBERS[family], ONE_THREAD) for name, family in MEMBER_ALONE.items()},
    DISTILLED: (TRANSFORMER, distilled_overrides(Path("runs/mixed/25min"))),
}


def member_config(family: str, seed: int, minutes: float, runs: Path):
    """Member ``family`` of the mixed run of ``seed``: its recipe on the runs' one prepared copy, one thread."""
    return load_config(
        MEMBERS[family],
        [
            *ONE_THREAD,
            f"run_dir={runs / f'{family}-member-seed{seed}'}",
            f"data.prepared_dir={prepared_dir(runs, [])}",
            f"train.seed={seed}",
            f"train.max_minutes={minutes}",
            "train.epochs=1000",
        ],
    )


def _train_member(family: str, seed: int, minutes: float, runs: Path, device_name: str) -> None:
    """One member's training, in a process of its own (both members train at once)."""
    config = member_config(family, seed, minutes, runs)
    train(config, prepare_device(device_name), resume=True, show_bar=False, log=lambda _: None)
    write_text_atomic(Path(config.run_dir) / "done", "")


def train_members(seed: int, minutes: float, runs: Path, device_name: str) -> dict[str, Path]:
    """Both members of ``seed`` (reused when done), side by side: the shared data prepared first,
    then one process each."""
    configs = {family: member_config(family, seed, minutes, runs) for family in MEMBERS}
    run_dirs = {family: Path(config.run_dir) for family, config in configs.items()}
    if all((run_dir / "done").is_file() for run_dir in run_dirs.values()):
        return run_dirs
    for config in configs.values():  # one prepared copy: the second finds it done
        prepare(config, log=lambda _: None)
    context = multiprocessing.get_context("spawn")  # each process sets its own threads
    with context.Pool(len(MEMBERS)) as pool:
        jobs = [pool.apply_async(_train_member, (family, seed, minutes, runs, device_name)) for family in MEMBERS]
        for job in jobs:
            job.get()
    return run_dirs


def member_packages(run_dirs: dict[str, Path], runs: Path) -> list[Path]:
    """The members exported as packages (once): what the ensemble and a student's teacher load."""
    packages = []
    for run_dir in run_dirs.values():
        package = runs / f"{run_dir.name}-package"
        if not (package / "manifest.json").is_file():
            export_model(run_dir, package)
        packages.append(package)
    return packages


def ensemble_scored(run_dirs: dict[str, Path], runs: Path, device, prepared) -> dict:
    """The members translated as one ensemble on their test split."""
    loaded = load_torch_packages(member_packages(run_dirs, runs), device)
    references = read_references(prepared.multi("test"))
    hypotheses = Translator(loaded).translate(references.sources)
    scores = score(hypotheses, references.references, metrics=("bleu", "chrf"))
    return {"bleu": scores["bleu"], "chrf": scores["chrf"], "parameters": loaded.parameters, "samples": hypotheses[:8]}


def mixed_scored(minutes: float, runs: Path, device_name: str, seed: int) -> dict:
    prepared = prepared_paths(member_config("transformer", seed, minutes, runs))  # both members' split
    return ensemble_scored(train_members(seed, minutes, runs, device_name), runs, prepare_device(device_name), prepared)


def member_scored(family: str, minutes: float, runs: Path, device_name: str, seed: int) -> dict:
    run_dir = train_members(seed, minutes, runs, device_name)[family]
    return evaluate_run(MEMBERS[family], run_dir, [], [], prepare_device(device_name))


def distilled_scored(minutes: float, runs: Path, device_name: str, seed: int) -> dict:
    """A student of ``seed`` taught by the pair of TEACHER_SEED, scored on the members' test split."""
    member_packages(train_members(TEACHER_SEED, minutes, runs, device_name), runs)
    test_set = prepared_paths(member_config("transformer", TEACHER_SEED, minutes, runs)).multi("test")
    overrides, device = distilled_overrides(runs), prepare_device(device_name)
    return trained_and_scored(TRANSFORMER, overrides, [], minutes, runs, device, seed, test_set=test_set)


def table(results: dict) -> str:
    lines = ["| eng-mar, same budget | test BLEU | chrF | BLEU per seed |", "|---|---:|---:|---|"]
    for name, rows in results.items():
        bleu, chrf = (statistics.fmean(row[key] for row in rows) for key in ("bleu", "chrf"))
        per_seed = " / ".join(f"{row['bleu']:.2f}" for row in rows)
        lines.append(f"| {name} | {bleu:.2f} | {chrf:.2f} | {per_seed} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = study_arguments(__doc__, list(VARIANTS), "runs/mixed", "docs/transformer", "cpu")
    args = parser.parse_args(argv)
    if args.check:
        return check_variants([(name, base, overrides) for name, (base, overrides) in VARIANTS.items()])
    device = prepare_device(args.device)
    runs = Path(args.runs) / f"{args.minutes:g}min"
    results_path = Path(args.out) / f"results-mixed-{args.minutes:g}min.json"
    results = results_so_far(results_path)
    for name in args.variants:
        base, overrides = VARIANTS[name]
        if name == MIXED:
            measure = partial(mixed_scored, args.minutes, runs, args.device)
        elif name in MEMBER_ALONE:  # a member of the mixed run, scored alone
            measure = partial(member_scored, MEMBER_ALONE[name], args.minutes, runs, args.device)
        elif name == DISTILLED:
            measure = partial(distilled_scored, args.minutes, runs, args.device)
        else:
            # beside the members, on their prepared copy: the same split, the same test file, prepared once
            measure = partial(trained_and_scored, base, overrides, [], args.minutes, runs, device)
        measure_seeds(name, args.seeds, measure, results, results_path)
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
