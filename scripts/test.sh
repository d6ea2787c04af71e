#!/usr/bin/env bash
# Set up, check style, and run the test suite (what CI runs).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
ruff check nmt tests scripts
ruff format --check nmt tests scripts
python -m pytest -q "$@"
