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
mypy  # the types of nmt/ ([tool.mypy] in pyproject.toml)
python -m pytest -q "$@"
