"""Show that the simulated-CUDA tier (tests/simcuda) catches the bugs that break first GPU runs.

Each mutant is one edit of nmt/ in a throwaway copy of the working tree; the tier runs on it
(as its own pytest process) and must fail, where the unedited copy and a control edit that
CUDA allows must pass. Prints one line per case and exits non-zero if any case goes the
wrong way. About three minutes on a 2-core CPU.

    python scripts/dev/simcuda_mutants.py
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Mutant:
    name: str
    path: str  # the file edited, under the repository
    before: str  # the text replaced (must occur exactly once)
    after: str
    tests: str  # the tier's tests that should see it (pytest -k)
    caught: bool = True  # False: a control, which the tier must pass


MUTANTS = [
    Mutant(
        "greedy's first tokens made without a device",
        "nmt/decoding/search.py",
        "prev = torch.full((batch,), BOS_ID, dtype=torch.long, device=src.device)",
        "prev = torch.full((batch,), BOS_ID, dtype=torch.long)",
        "test_search_on_cuda and greedy",
    ),
    Mutant(
        "the epoch meter's sums on the CPU",
        "nmt/training/meter.py",
        "self.pending = torch.zeros(4, device=device)",
        "self.pending = torch.zeros(4)",
        "test_float32_steps and packed-gru",
    ),
    Mutant(
        "a token count read from the device batch",
        "nmt/training/trainer.py",
        "batch = word_dropout(batch.to(self.device), settings.word_dropout)",
        "batch = word_dropout(batch.to(self.device), settings.word_dropout)\n        tokens = batch.num_tgt_tokens",
        "test_float32_steps and packed-gru",
    ),
    Mutant(
        "bool(nonfinite) before the fused step",
        "nmt/training/step.py",
        'if loss_sum.is_cuda and optimizer.defaults.get("fused"):',
        'if loss_sum.is_cuda and optimizer.defaults.get("fused") and not bool(nonfinite):',
        "test_float32_steps and packed-gru",
    ),
    Mutant(
        "found_inf handed to the fused step as a bool",
        "nmt/training/step.py",
        "optimizer.found_inf = nonfinite.float()",
        "optimizer.found_inf = nonfinite",
        "test_float32_steps and packed-gru",
    ),
    Mutant(
        "control: beam search keeps sentences with a CPU row index (CUDA allows it)",
        "nmt/decoding/search.py",
        "keep = torch.tensor(still, device=scores.device)",
        "keep = torch.tensor(still)",
        "test_search_on_cuda and beam",
        caught=False,
    ),
]


def copy_tree(destination: Path) -> None:
    """The working tree's files as git sees them (tracked and untracked, not ignored)."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, listed):
        source = ROOT / name.decode()
        if source.is_file():
            target = destination / name.decode()
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def apply(tree: Path, mutant: Mutant) -> None:
    path = tree / mutant.path
    text = path.read_text(encoding="utf-8")
    if text.count(mutant.before) != 1:
        raise SystemExit(f"{mutant.name}: {mutant.path} no longer has the line to edit once: {mutant.before!r}")
    path.write_text(text.replace(mutant.before, mutant.after), encoding="utf-8")


def tier_passes(tree: Path, tests: str) -> tuple[bool, str]:
    environment = {**os.environ, "NMT_SIMULATED_CUDA": "1", "PYTHONPATH": str(tree)}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "tests/simcuda", "-k", tests],
        cwd=tree,
        env=environment,
        capture_output=True,
        text=True,
    )
    errors = [line for line in result.stdout.splitlines() if line.startswith("E  ")]
    return result.returncode == 0, (errors[0][3:].strip() if errors else result.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--check", action="store_true", help="only check that every mutant's edit still applies to the tree (seconds)"
    )
    args = parser.parse_args()
    if args.check:
        for mutant in MUTANTS:
            text = (ROOT / mutant.path).read_text(encoding="utf-8")
            if text.count(mutant.before) != 1:
                raise SystemExit(f"{mutant.name}: {mutant.path} no longer has the line to edit once: {mutant.before!r}")
        print(f"all {len(MUTANTS)} mutants apply")
        return 0
    wrong = 0
    cases = [Mutant("unedited", "", "", "", "test_float32_steps and packed-gru or test_search_on_cuda", False)]
    for mutant in cases + MUTANTS:
        with tempfile.TemporaryDirectory(prefix="nmt-mutant-") as scratch:
            tree = Path(scratch)
            copy_tree(tree)
            if mutant.path:
                apply(tree, mutant)
            start = time.perf_counter()
            passed, said = tier_passes(tree, mutant.tests)
        right = passed != mutant.caught
        wrong += not right
        verdict = ("caught" if not passed else "missed") if mutant.caught else ("passes" if passed else "FALSE ALARM")
        seconds = time.perf_counter() - start
        print(f"{'ok ' if right else 'BAD'} {mutant.name}: {verdict} ({seconds:.0f} s) {said[:150]}")
    print("every mutant caught, no false alarm" if not wrong else f"{wrong} case(s) went the wrong way")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
