#!/usr/bin/env bash
# Set up, check style and types, and run the test suite (what CI runs).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
# the in-browser page's runtime (nmt export --web), pinned in web/package.json, once
if command -v npm >/dev/null && [ ! -f web/node_modules/.package-lock.json ]; then
  npm ci --prefix web --no-audit --no-fund --loglevel=error
fi
ruff check nmt tests scripts
ruff format --check nmt tests scripts
# The types of nmt/ ([tool.mypy] in pyproject.toml): half a minute of one core, beside the suite's start
types_log="$(mktemp)"
mypy >"$types_log" 2>&1 &
types=$!
# Three tests at a time (pytest-xdist), each file on one worker so that a module's trained fixtures are
# made once, the longest files first (tests/conftest.py; xdist's own order, by test count, is off).
# Each test runs on one thread (tests/conftest.py), so a third worker fills the time the other two
# wait on processes, browsers and servers: 1,029 s -> 941 s on a 2-core CI machine, as two was 1.8
# times one. `python -m pytest FILE` alone runs one at a time.
parallel=(-n 3 --dist loadfile --no-loadscope-reorder)
# The suite's verdict is held until mypy's is printed too: a failing suite still shows its types.
tests_status=0
python -m pytest -q "${parallel[@]}" --durations=15 "$@" || tests_status=$?  # the slowest: CI's 20 minutes
types_status=0
wait "$types" || types_status=$?
cat "$types_log"
rm -f "$types_log"
if [ "$tests_status" -ne 0 ] || [ "$types_status" -ne 0 ]; then exit 1; fi
# The simulated-CUDA tier (tests/simcuda, docs/tutorials/hardware.md): a process of its own, since its
# shim must load before torch. With the whole suite only (no arguments), and where a C++ compiler is.
if [ $# -eq 0 ]; then
  if command -v "${CXX:-g++}" >/dev/null; then
    # no module fixtures there: a test at a time to either worker, not a file (69 s -> 57 s on 2 cores)
    NMT_SIMULATED_CUDA=1 python -m pytest -q -n 2 tests/simcuda
  else
    echo "The simulated-CUDA tier needs g++ (or \$CXX) to build its shim: skipped." >&2
  fi
fi
