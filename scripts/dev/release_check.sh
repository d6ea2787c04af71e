#!/usr/bin/env bash
# What a release checks on the wheel before it is published (.github/workflows/release.yml), and
# what tests/test_wheel.py runs on every CI: the installed `nmt` in BIN (a fresh environment's bin/),
# used from an empty folder on the example it carries — init, prepare, a short train, translate,
# evaluate — never this checkout's code.
#   bash scripts/dev/release_check.sh .venv-release/bin
set -euo pipefail
bin=$(cd "$1" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
unset PYTHONPATH VIRTUAL_ENV
"$bin/python" -c "import nmt, sys; sys.exit('the checkout, not the wheel' if 'site-packages' not in nmt.__file__ else 0)"
"$bin/nmt" --help >/dev/null
"$bin/nmt" init --example eng-hin
small=(--set train.max_minutes=0.1 --set train.epochs=1 --set train.members=1 --set model.embed_dim=32
       --set model.encoder_hidden=32 --set model.decoder_hidden=32 --set model.attention_dim=32 --set model.output_dim=32)
"$bin/nmt" prepare --config configs/eng-hin-scratch.yaml
"$bin/nmt" train --config configs/eng-hin-scratch.yaml "${small[@]}"
"$bin/nmt" translate --config configs/eng-hin-scratch.yaml "${small[@]}" --text "Where is the station?"
# Read whole, then searched: `| grep -q` would close the pipe at the first match, and the rest of
# the report would meet a closed pipe (a failure under pipefail, however the race falls).
report=$("$bin/nmt" evaluate --config configs/eng-hin-scratch.yaml "${small[@]}")
grep -q BLEU <<<"$report"
echo "release check passed: $("$bin/python" -c 'import nmt; print(nmt.__version__)')"
