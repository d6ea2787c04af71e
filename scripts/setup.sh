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
# pip's own check that nothing is missing takes seconds: skip it while pyproject.toml and this file
# are the ones the .venv was last installed from (their hash in .venv/nmt-installed); a change installs again
stamp=".venv/nmt-installed"
wanted="$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ] || ! python -c "import nmt" 2>/dev/null; then
  # --no-compile: pip would byte-compile every module of ~250 packages (transformers, spaCy, optuna...),
  # a third of this step, where Python compiles the few a process imports, once, on first use
  python -m pip install --quiet --disable-pip-version-check --no-compile -e ".[test]"
  # Inseq, a client the suite tests (tests/test_huggingface.py): its package requires CUDA 11's
  # libraries on Linux, gigabytes a CPU never loads, so it and what it imports come without requirements
  python -m pip install --quiet --disable-pip-version-check --no-compile --no-deps "inseq==0.7.1" "captum>=0.7" \
    "jaxtyping>=0.2.25" "wadler-lindig>=0.1" "typeguard==2.13.3" "treescope>=0.1"
  echo "$wanted" > "$stamp"
fi
