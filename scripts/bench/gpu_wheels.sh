#!/usr/bin/env bash
# The wheels a GPU loan needs beyond its image, into .whl (ignored by git; `carry` it): the loan's
# machine reaches no package registry, and its image holds torch, sentencepiece, sacrebleu, typer,
# pyyaml, tqdm, matplotlib and safetensors but not this project's server and fonts, nor JoeyNMT 2.3
# and what it imports (../shared/peers/joeynmt.md). For its Python, 3.12. Then, on the loan:
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
set -euo pipefail
cd "$(dirname "$0")/../.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo /.whl/ >>.git/info/exclude
mkdir -p .whl
python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d .whl \
  starlette uvicorn h11 \
  fontpkg-noto-sans-devanagari fontpkg-noto-sans-arabic fontpkg-noto-sans-tamil fontpkg-noto-sans-telugu \
  fontpkg-noto-sans-thai fontpkg-noto-sans-khmer \
  joeynmt==2.3.0 subword-nmt mock importlib-metadata lazy-importer yapf platformdirs sentencepiece==0.2.0
du -sh .whl
