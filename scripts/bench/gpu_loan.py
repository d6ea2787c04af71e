#!/usr/bin/env python
"""A GPU loan's one prepared run: the figures docs/benchmarks.md leaves open, in order of value,
each part bounded so that the whole fits about nine minutes of an H100 or H200.

    1. the GPU test tier (pytest -m gpu, six at a time where pytest-xdist is there)
    2. the main job with the GPU recipe (scripts/main.sh, configs/eng-mar-gpu.yaml): wall clock, test BLEU
    3. training throughput at 8,000 and 32,000-token batches: the RNN recipe and the Transformer recipe,
       eager and graphed (train.compile: reduce-overhead), and JoeyNMT 2.3's RNN and Transformer of the
       same sizes in the same run where it is installed (scripts/bench/bench_train.py)
    4. the Transformer GPU recipe at the RNN recipe's budget (configs/eng-mar-transformer-gpu.yaml):
       test BLEU, and when it reached its best dev BLEU (the RNN's from part 2)

Every part's output goes to OUT/loan.log as it comes, and OUT/loan.json is written again after each
part, so a loan that ends early still returns what it measured. A part that fails or passes its
bound is recorded as such and the next one runs.

On the loan (no package registry there: the wheels this project and JoeyNMT need beyond the image's
travel in .whl, made here by scripts/bench/gpu_wheels.sh; see docs/benchmarks.md, "A GPU loan"):

    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
    PYTHONUNBUFFERED=1 python3 scripts/bench/gpu_loan.py --out $OUT

Checked on the CPU before any loan (tiny budgets, the same parts and files):

    python scripts/bench/gpu_loan.py --device cpu --tiny --out /tmp/loan
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RNN_GPU, TRANSFORMER_GPU = "configs/eng-mar-gpu.yaml", "configs/eng-mar-transformer-gpu.yaml"


class Loan:
    """The log and the JSON of one run, both written as it goes."""

    def __init__(self, out: Path, device: str, tiny: bool):
        out.mkdir(parents=True, exist_ok=True)
        self.log_path, self.json_path = out / "loan.log", out / "loan.json"
        self.device, self.tiny = device, tiny
        self.results: dict = {
            "device": device,
            "tiny": tiny,
            "started": time.strftime("%Y-%m-%d %H:%M:%S"),
            "parts": {},
        }
        self.log_path.write_text("", encoding="utf-8")

    def say(self, text: str) -> None:
        with open(self.log_path, "a", encoding="utf-8") as log:
            log.write(text + ("" if text.endswith("\n") else "\n"))
        print(text, flush=True)

    def run(self, name: str, command: list[str], seconds: float, env: dict | None = None) -> tuple[int | None, str]:
        """``command`` from the repository's root, its output to the log as it comes: (exit status or
        None past ``seconds``, the output)."""
        self.say(f"=== {name}: {' '.join(command)} (at most {seconds:.0f} s)")
        start, lines = time.monotonic(), []
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            env={**os.environ, **(env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        assert process.stdout is not None
        try:
            for line in process.stdout:
                lines.append(line)
                self.say(line.rstrip("\n"))
                if time.monotonic() - start > seconds:
                    raise TimeoutError
            status: int | None = process.wait(timeout=max(1.0, seconds - (time.monotonic() - start)))
        except (TimeoutError, subprocess.TimeoutExpired):
            os.killpg(process.pid, 9)
            process.wait()
            status = None
            self.say(f"=== {name}: stopped at its bound of {seconds:.0f} s")
        self.say(
            f"=== {name}: {'exit ' + str(status) if status is not None else 'bounded'} after "
            f"{time.monotonic() - start:.0f} s"
        )
        return status, "".join(lines)

    def record(self, name: str, figures: dict) -> None:
        self.results["parts"][name] = figures
        tmp = self.json_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.results, indent=1) + "\n", encoding="utf-8")
        tmp.replace(self.json_path)


def environment(loan: Loan) -> None:
    status, output = loan.run(
        "environment",
        [
            sys.executable,
            "-c",
            "import torch, sys; print(sys.version.split()[0], torch.__version__, torch.version.cuda, "
            "torch.cuda.get_device_name() if torch.cuda.is_available() else 'no GPU')",
        ],
        60,
    )
    loan.record("environment", {"status": status, "versions": output.strip().splitlines()[-1:] if output else []})


def tier(loan: Loan) -> None:
    command = [sys.executable, "-m", "pytest", "-q", "-m", "gpu", "-rs", "tests/test_gpu.py"]
    try:
        import xdist  # noqa: F401

        command += ["-n", "6"]
    except ImportError:
        pass
    status, output = loan.run("gpu test tier", command, 150)
    summary = [line for line in output.splitlines() if re.search(r"\d+ (passed|failed|skipped)", line)]
    loan.record("gpu test tier", {"status": status, "summary": summary[-1:] if summary else []})


def scores(output: str) -> dict:
    """BLEU and chrF from `nmt evaluate`'s lines."""
    found = {}
    for metric in ("BLEU", "CHRF"):
        match = re.search(rf"^{metric}\s+([\d.]+)", output, re.MULTILINE)
        if match:
            found[metric.lower()] = float(match.group(1))
    return found


def best_dev(run_dir: Path) -> dict:
    """When a run reached its best dev BLEU (training seconds and the budget's), from metrics.jsonl."""
    path = ROOT / run_dir / "metrics.jsonl"
    if not path.is_file():
        return {}
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    best = max(records, key=lambda r: r["dev_bleu"], default=None)
    if best is None:
        return {}
    return {
        "best_dev_bleu": best["dev_bleu"],
        "best_after_training_s": best["train_seconds"],
        "best_after_s": best["elapsed_seconds"],
        "epochs": best.get("epochs") or best["epoch"],
    }


def main_job(loan: Loan, minutes: float) -> None:
    """scripts/main.sh with the GPU recipe, as a user runs it (offline: the package from this tree)."""
    run_dir = "runs/loan-eng-mar-gpu"
    env = {
        "CONFIG": RNN_GPU,
        "NMT_OFFLINE": "1",
        "MAIN_RUN_DIR": run_dir,
        "MAIN_MINUTES": f"{minutes:g}",
        "MAIN_DEVICE": loan.device,
    }
    start = time.monotonic()
    status, output = loan.run("main job (GPU recipe)", ["bash", "scripts/main.sh"], 60 * minutes + 150, env)
    figures = {"status": status, "wall_clock_s": round(time.monotonic() - start, 1), **scores(output)}
    loan.record("main job", {**figures, **best_dev(Path(run_dir))})


def throughput(loan: Loan, steps: int) -> None:
    """Target tokens/s of both families, eager and graphed, at two batch sizes, JoeyNMT beside."""
    bench = [sys.executable, "scripts/bench/bench_train.py", "--device", loan.device, "--steps", str(steps)]
    plans = [
        ("rnn, 8000 tokens", RNN_GPU, 8000, ["default", "graphed", "equivalent", "peer"]),
        ("transformer, 8000 tokens", TRANSFORMER_GPU, 8000, ["default", "graphed", "transformer"]),
        ("rnn, 32000 tokens", RNN_GPU, 32000, ["default", "graphed"]),
        ("transformer, 32000 tokens", TRANSFORMER_GPU, 32000, ["default", "graphed"]),
    ]
    for name, config, tokens, rows in plans:
        tokens = 400 if loan.tiny else tokens
        json_path = loan.json_path.parent / f"train-{re.sub(r'[^a-z0-9]+', '-', name)}.json"
        sets = [f"train.batch_tokens={tokens}", f"train.batch_size={tokens // 2}"]
        command = [*bench, "--config", config, "--rows", *rows, "--json", str(json_path), "--set", *sets]
        status, _ = loan.run(f"throughput, {name}", command, 120)
        rows_found = json.loads(json_path.read_text(encoding="utf-8")) if json_path.is_file() else None
        loan.record(f"throughput, {name}", {"status": status, "rows": rows_found})
        json_path.unlink(missing_ok=True)  # its rows are in loan.json: the loan returns eight files at most


def transformer_race(loan: Loan, minutes: float) -> None:
    """The Transformer GPU recipe at the RNN recipe's budget: test BLEU, and when it reached its best."""
    run_dir = "runs/loan-eng-mar-transformer-gpu"
    common = ["--config", TRANSFORMER_GPU, "--device", loan.device, "--set", f"run_dir={run_dir}"]
    train = [sys.executable, "-m", "nmt", "train", *common, "--minutes", f"{minutes:g}", "--resume"]
    status, _ = loan.run("the Transformer GPU recipe", train, 60 * minutes + 90)
    figures: dict = {"status": status, **best_dev(Path(run_dir))}
    if status == 0:
        evaluated, output = loan.run(
            "the Transformer GPU recipe, test", [sys.executable, "-m", "nmt", "evaluate", *common], 90
        )
        figures |= {"evaluate_status": evaluated, **scores(output)}
    loan.record("transformer race", figures)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "loan-out")))
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--tiny", action="store_true", help="the CPU check: budgets of seconds, a few steps")
    args = parser.parse_args()
    loan = Loan(args.out, args.device, args.tiny)
    minutes = 0.15 if args.tiny else 3.0
    environment(loan)
    tier(loan)
    main_job(loan, minutes)
    throughput(loan, 5 if args.tiny else 100)
    transformer_race(loan, minutes)
    loan.results["ended"] = time.strftime("%Y-%m-%d %H:%M:%S")
    loan.record("done", {"parts": list(loan.results["parts"])})


if __name__ == "__main__":
    main()
