"""Write tests/file_seconds.json from a run of the suite with ``--durations=0``: the seconds each
test file took, its tests' setup, call and teardown together. tests/conftest.py starts the longest
files first, since each file runs on one worker (scripts/test.sh): a long file started last keeps
the run going while the other workers wait. Files under ``--min`` seconds are left out (they run
after, in collection order); run it again when files grow or move.

    python -m pytest -n 3 --dist loadfile --durations=0 > suite.log
    python scripts/dev/test_file_seconds.py suite.log
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from pathlib import Path

from nmt.core.fileio import write_text_atomic

ROOT = Path(__file__).resolve().parents[2]
# a line of pytest's durations report: "12.34s call     tests/test_x.py::test_y[param]"
DURATION = re.compile(r"^([\d.]+)s (?:setup|call|teardown)\s+(tests/[^:\s]+\.py)::")


def file_seconds(log: str) -> dict[str, int]:
    seconds: Counter[str] = Counter()
    for line in log.splitlines():
        found = DURATION.match(line)
        if found:
            seconds[found[2]] += float(found[1])
    return {name: round(total) for name, total in seconds.most_common()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("log", type=Path, help="the output of a pytest run with --durations=0")
    parser.add_argument("--out", type=Path, default=ROOT / "tests" / "file_seconds.json")
    parser.add_argument("--min", type=float, default=15.0, help="leave out files faster than this (seconds)")
    args = parser.parse_args()
    measured = file_seconds(args.log.read_text(encoding="utf-8"))
    if not measured:
        parser.error(f"{args.log}: no durations in it (run pytest with --durations=0)")
    kept = {name: total for name, total in measured.items() if total >= args.min}
    write_text_atomic(args.out, json.dumps(kept, indent=1) + "\n")
    print(f"{args.out}: {len(kept)} files of {len(measured)}, {sum(kept.values())} s of {sum(measured.values())} s")


if __name__ == "__main__":
    main()
