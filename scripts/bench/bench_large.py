#!/usr/bin/env python
"""Large corpora: prepare time and peak memory, and training peak memory and wall clock, on a
synthetic corpus of N pairs built from the shipped eng-mar data (real sentences joined two by
two, so each pair is new and the vocabulary is the real one).

    python scripts/bench/bench_large.py --pairs 1000000
    python scripts/bench/bench_large.py --pairs 1000000 3000000 --train-minutes 1

Each step runs as its own process (``nmt prepare``, ``nmt train --minutes M``); peak memory is
the process's maximum resident set size. Writes into --work (default runs/bench-large).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def build_corpus(path: Path, pairs: int, seed: int = 0) -> Path:
    """``pairs`` lines "en1 en2<TAB>mr1 mr2" from random pairs of the shipped pairs."""
    if path.is_file():
        with open(path, encoding="utf-8") as handle:
            if sum(1 for _ in handle) == pairs:
                return path
    lines = (ROOT / "data/eng-mar/mar.txt").read_text(encoding="utf-8").splitlines()
    shipped = [line.split("\t")[:2] for line in lines]
    rng = random.Random(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        for _ in range(pairs):
            (a_en, a_mr), (b_en, b_mr) = rng.choice(shipped), rng.choice(shipped)
            handle.write(f"{a_en} {b_en}\t{a_mr} {b_mr}\n")
    return path


def timed(command: list[str]) -> tuple[float, float, int]:
    """(seconds, peak resident MiB, exit code) of ``command`` as a child process (its own
    peak, read from the rusage ``wait4`` returns for it alone)."""
    start = time.perf_counter()
    child = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - start, usage.ru_maxrss / 1024, child.returncode  # ru_maxrss: KiB on Linux


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, nargs="+", default=[1_000_000])
    parser.add_argument("--train-minutes", type=float, default=1.0)
    parser.add_argument("--config", default="configs/eng-mar-cpu.yaml")
    parser.add_argument("--work", default="runs/bench-large")
    args = parser.parse_args()
    work = ROOT / args.work
    rows = []
    for pairs in args.pairs:
        corpus = build_corpus(work / f"corpus-{pairs}.tsv", pairs)
        raw = yaml.safe_load((ROOT / args.config).read_text(encoding="utf-8"))
        raw["run_dir"] = str(work / f"run-{pairs}")
        shutil.rmtree(raw["run_dir"], ignore_errors=True)  # a new run each time
        raw["data"]["path"] = str(corpus)
        raw["data"]["prepared_dir"] = str(work / f"prepared-{pairs}")
        config = work / f"config-{pairs}.yaml"
        config.write_text(yaml.safe_dump(raw), encoding="utf-8")
        nmt = [sys.executable, "-m", "nmt"]
        prepare = timed([*nmt, "prepare", "--config", str(config), "--force"])
        train = timed([*nmt, "train", "--config", str(config), "--minutes", str(args.train_minutes)])
        size = corpus.stat().st_size / 2**20
        rows.append((pairs, size, *prepare, *train))
        print(
            f"{pairs:,} pairs ({size:.0f} MiB): prepare {prepare[0]:.0f} s, peak {prepare[1]:,.0f} MiB; "
            f"train --minutes {args.train_minutes:g}: {train[0]:.0f} s wall, peak {train[1]:,.0f} MiB"
        )
    print("\n| pairs | corpus MiB | prepare s | prepare peak MiB | train wall s | train peak MiB |")
    print("|---:|---:|---:|---:|---:|---:|")
    for pairs, size, p_s, p_mib, p_code, t_s, t_mib, t_code in rows:
        failed = "" if p_code == t_code == 0 else f" (exit codes {p_code}, {t_code})"
        print(f"| {pairs:,} | {size:.0f} | {p_s:.0f} | {p_mib:,.0f} | {t_s:.0f} | {t_mib:,.0f}{failed} |")
    return int(any(row[4] or row[7] for row in rows))  # a failed prepare or training fails the benchmark


if __name__ == "__main__":
    sys.exit(main())
