#!/usr/bin/env python
"""Threads on a busy machine: training and decoding rates at fixed thread counts and at `auto`,
alone and beside other processes' load (docs/benchmarks.md, "Threads on a busy machine").

Training rows: `nmt train` of a config for --seconds (its own process, the budget counting the
thread measurement as any run does), the target tokens/s of its metrics.jsonl. Loads: idle;
busy1 / busy2 (one or two `while True: pass` processes from the start); halfway (one starting
halfway through the run). Decoding rows: the test split translated at beam 5 by a trained
checkpoint, each repeat with a new translator (auto measures anew, its measurement counted).
Each row prints its ratio to the best fixed count of its condition and to `threads: 2`.

    python scripts/bench/bench_threads.py --config configs/eng-mar-cpu.yaml --seconds 45
    python scripts/bench/bench_threads.py --config configs/eng-mar-transformer.yaml --seconds 45
    python scripts/bench/bench_threads.py --decode runs/eng-mar-cpu --loads idle,busy1
    python scripts/bench/bench_threads.py --config configs/eng-mar-cpu.yaml --bleu-seeds 1,2 \
        --loads busy1 --settings 2,auto

--bleu-seeds: instead of rates, the config's whole budget trained (and evaluated: test BLEU and chrF,
all references) for each seed, setting and load.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import bench_common as bc  # noqa: F401  (puts this folder on the path, as the other benches)
import torch

LOADS = {"idle": (0, 0.0), "busy1": (1, 0.0), "busy2": (2, 0.0), "halfway": (1, 0.5)}


def spin() -> None:
    while True:
        pass


class Load:
    """``count`` busy processes, started ``after`` seconds from now (0: at once)."""

    def __init__(self, count: int, after: float):
        context = multiprocessing.get_context("spawn")
        self.processes = [context.Process(target=spin, daemon=True) for _ in range(count)]
        self.timer = threading.Timer(after, self.start) if after else None

    def start(self) -> None:
        for process in self.processes:
            process.start()

    def __enter__(self) -> Load:
        if self.timer is not None:
            self.timer.start()
        else:
            self.start()
            time.sleep(0.5)  # running before the measured work starts
        return self

    def __exit__(self, *_exc) -> None:
        if self.timer is not None:
            self.timer.cancel()
        for process in self.processes:
            if process.pid is not None:
                process.terminate()
                process.join()


def train_rate(config: str, threads: str, seconds: float, prepared: str) -> dict:
    """One training run in a process of its own: its tokens/s and the threads it ended with."""
    with tempfile.TemporaryDirectory() as run_dir:
        command = [sys.executable, "-m", "nmt", "train", "--config", config, "--minutes", f"{seconds / 60:.4f}"]
        command += ["--set", f"run_dir={run_dir}", "--set", f"data.prepared_dir={prepared}"]
        command += ["--set", f"train.threads={threads}", "--set", "train.probes=0"]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(done.stderr[-2000:])
        record = [json.loads(line) for line in (Path(run_dir) / "metrics.jsonl").read_text().splitlines()][-1]
        log = (Path(run_dir) / "train.log").read_text(encoding="utf-8")
    chosen = [line.split(" ", 2)[2] for line in log.splitlines() if "Threads measured" in line]
    return {"tokens_per_s": record["tokens_per_s"], "threads_at_end": record.get("threads"), "log": chosen}


def budget_bleu(config: str, threads: str, seed: int, prepared: str, keep: Path) -> dict:
    """The config's whole budget at ``threads`` and ``seed``, then its test BLEU and chrF."""
    run_dir = keep / f"threads-{threads}-seed{seed}"
    shared = ["--set", f"run_dir={run_dir}", "--set", f"data.prepared_dir={prepared}"]
    shared += ["--set", f"train.threads={threads}", "--set", f"train.seed={seed}"]
    trained = subprocess.run([sys.executable, "-m", "nmt", "train", "--config", config, *shared], capture_output=True)
    if trained.returncode:
        raise SystemExit(trained.stderr.decode()[-2000:])
    command = [sys.executable, "-m", "nmt", "evaluate", "--config", config, *shared, "--json"]
    report = json.loads(subprocess.run(command, capture_output=True, check=True, text=True).stdout)
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    epochs = records[-1].get("epochs") or records[-1]["epoch"]
    rate = statistics.fmean(r["tokens_per_s"] for r in records)
    scores = {"test_bleu": report["bleu"], "test_chrf": report["chrf"]}
    return {"seed": seed, **scores, "epochs": epochs, "tokens_per_s": rate}


def decode_rates(run: Path, settings: list[str], repeats: int) -> dict[str, dict]:
    """Sentences/s of the test split at beam 5 for each setting (median of ``repeats``, the settings
    interleaved, each time with a new translator: auto measures anew, as a command does)."""
    from nmt.config.paths import prepared_paths
    from nmt.core.threads import DECODING, make_tuner, parse_setting
    from nmt.data.references import read_references
    from nmt.pipelines.translate import Translator
    from nmt.runtime.loading import load_trained

    before = torch.get_num_threads()
    loaded = load_trained(run, torch.device("cpu"))
    sources = read_references(prepared_paths(loaded.config).multi("test")).sources
    rates: dict[str, list[float]] = {setting: [] for setting in settings}
    ended: dict[str, list[int]] = {setting: [] for setting in settings}
    for _ in range(repeats):
        for threads in settings:
            torch.set_num_threads(before)
            tuner = make_tuner(parse_setting(threads, "threads"), torch.device("cpu"), settings=DECODING)
            translator = Translator(loaded, threads=tuner)
            start = time.perf_counter()
            translator.translate(sources, beam_size=5)
            rates[threads].append(len(sources) / (time.perf_counter() - start))
            ended[threads].append(torch.get_num_threads())
    torch.set_num_threads(before)
    return {
        threads: {"sentences_per_s": statistics.median(rates[threads]), "runs": rates[threads], "ended": ended[threads]}
        for threads in settings
    }


def table(rows: list[dict], rate: str) -> None:
    """The rows with each one's ratio to its condition's best fixed count and to threads 2."""
    for load in dict.fromkeys(row["load"] for row in rows):
        group = [row for row in rows if row["load"] == load]
        fixed = [row[rate] for row in group if row["threads"] != "auto"]
        best = max(fixed) if fixed else 0.0
        two = next((row[rate] for row in group if row["threads"] == "2"), 0.0)
        for row in group:
            vs_best = f"{row[rate] / best:.2f}x best fixed" if best else ""
            vs_two = f"{row[rate] / two:.2f}x threads 2" if two else ""
            print(f"{load:8s} threads {row['threads']:>4s}: {row[rate]:9,.1f} {rate}  {vs_best}  {vs_two}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", help="training rows: this config (its data prepared first)")
    parser.add_argument("--decode", type=Path, help="decoding rows: this trained run folder")
    parser.add_argument("--seconds", type=float, default=45.0)
    parser.add_argument("--settings", default="1,2,auto")
    parser.add_argument("--loads", default="idle,busy1,busy2,halfway")
    parser.add_argument("--repeats", type=int, default=3, help="repeats per row, interleaved (the median)")
    parser.add_argument("--bleu-seeds", help="train the whole budget with these seeds and score the test split")
    parser.add_argument("--keep", type=Path, default=Path("runs/bench-threads"), help="--bleu-seeds: the runs")
    parser.add_argument("--out", type=Path, help="also write the rows as JSON")
    args = parser.parse_args()
    from nmt.core.hardware import hardware_description

    print(f"Hardware: {hardware_description()}", flush=True)
    rows: list[dict] = []
    loads, settings = args.loads.split(","), args.settings.split(",")
    if args.config:
        prepared = tempfile.mkdtemp(prefix="bench-threads-data-")
        subprocess.run(
            [sys.executable, "-m", "nmt", "prepare", "--config", args.config, "--set", f"data.prepared_dir={prepared}"],
            check=True,
            capture_output=True,
        )
        if args.bleu_seeds:
            for load in loads:
                for threads in settings:
                    for seed in [int(x) for x in args.bleu_seeds.split(",")]:
                        with Load(LOADS[load][0], 0.0):
                            measured = budget_bleu(args.config, threads, seed, prepared, args.keep / load)
                        rows.append({"load": load, "threads": threads, **measured})
                        print(json.dumps(rows[-1]), flush=True)
            table(rows, "test_bleu")
        else:
            runs: dict[tuple[str, str], list[dict]] = {}
            for _ in range(args.repeats):  # rows interleaved: a slow spell of the machine spreads over all
                for load in loads:
                    count, share = LOADS[load]
                    for threads in settings:
                        with Load(count, share * args.seconds):
                            found = train_rate(args.config, threads, args.seconds, prepared)
                        runs.setdefault((load, threads), []).append(found)
                        print(json.dumps({"load": load, "threads": threads, **found}), flush=True)
            for (load, threads), found in runs.items():
                rate = statistics.median(f["tokens_per_s"] for f in found)
                rows.append({"load": load, "threads": threads, "tokens_per_s": rate, "runs": found})
            table(rows, "tokens_per_s")
    if args.decode:
        decoded = []
        for load in loads:
            with Load(LOADS[load][0], 0.0):
                found = decode_rates(args.decode, settings, args.repeats)
            for threads in settings:
                decoded.append({"load": load, "threads": threads, **found[threads]})
                print(json.dumps(decoded[-1]), flush=True)
        table(decoded, "sentences_per_s")
        rows += decoded
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
