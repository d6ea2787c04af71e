#!/usr/bin/env bash
# Create .venv (seeing system packages, so an installed PyTorch is reused), install PyTorch only
# where it is missing, then this package. Sourced by main.sh and test.sh; activates .venv.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON=${PYTHON:-python3}
if [ "${NMT_OFFLINE:-0}" = 1 ]; then
  # A machine that reaches no package registry (a GPU loan: scripts/bench/gpu_loan.py): the python
  # there and this tree's package as it is, `nmt` run as `python -m nmt`; nothing is installed.
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
  command -v python >/dev/null || python() { "$PYTHON" "$@"; }
  nmt() { "$PYTHON" -m nmt "$@"; }
  return 0
fi
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv --system-site-packages .venv
fi
# shellcheck disable=SC1091
source .venv/bin/activate
if ! python -c "import torch" 2>/dev/null; then
  # A pinned release: on machines with a local CPU wheel this installs in seconds.
  python -m pip install --quiet "torch==${TORCH_VERSION:-2.13.0}"
fi
# pip's own check that nothing is missing takes seconds: skip it while pyproject.toml is the one the
# .venv was last installed from (its hash in .venv/nmt-installed); a changed one installs again
stamp=".venv/nmt-installed"
wanted="$(sha256sum pyproject.toml | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ] || ! python -c "import nmt" 2>/dev/null; then
  python -m pip install --quiet --disable-pip-version-check -e ".[test]"
  echo "$wanted" > "$stamp"
fi
