#!/usr/bin/env bash
# One GPU loan's prepared run for the Transformer's shapes (docs/transformer.md, "In Marian's shape",
# on a GPU): the GPU tier's Hugging Face tests (imported Marian and NLLB models on the device, a
# model trained there in Marian's shape exported to transformers), then the Transformer GPU recipe
# pre-norm and in Marian's shape for MINUTES each, seed 1 of both before seed 2, each part bounded
# so the whole ends inside BUDGET seconds. Logs and results-gpu-<minutes>min.json go to OUT.
#   bash scripts/bench/gpu_wheels.sh   # here, once: .whl, carried to the loan
#   # on the loan (carry [".whl"]):
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
#   bash scripts/bench/gpu_shapes.sh
set -uo pipefail
out=${OUT:-gpu-shapes-out} minutes=${GPU_SHAPES_MINUTES:-1} budget=${GPU_SHAPES_BUDGET:-560}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
left() { echo $((budget - SECONDS)); }
{
  nvidia-smi -L
  python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
  lscpu | grep 'Model name'
} 2>&1 | tee "$out/env.txt"
timeout 150 python3 -m pytest -q -m gpu -rs -n 3 -p no:cacheprovider tests/test_gpu.py \
  -k "hf_model or marians_shape" 2>&1 | tee "$out/tests.log"
shapes=("transformer gpu recipe: 2 + 2 layers, feed-forward 512, dropout 0.1"
  "transformer gpu recipe in Marian's shape: post-norm, marian positions")
for seed in 1 2; do
  [ "$(left)" -gt 60 ] || break
  timeout "$(left)" python3 scripts/studies/transformer.py --device cuda --minutes "$minutes" --seeds "$seed" \
    --variants "${shapes[@]}" --out "$out" --runs /tmp/gpu-shapes-runs 2>&1 | tee -a "$out/study.log"
done
echo "ended after $SECONDS s"
