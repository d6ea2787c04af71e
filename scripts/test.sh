#!/usr/bin/env bash
# Set up and run the test suite (what CI runs).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
python -m pytest -q "$@"
