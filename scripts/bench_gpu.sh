#!/usr/bin/env bash
# Every CUDA figure of docs/benchmarks.md in one command, on a machine with an NVIDIA GPU
# (JoeyNMT rows when joeynmt is installed; see docs/benchmarks.md). Run from the repository root:
#   bash scripts/bench_gpu.sh 2>&1 | tee bench-gpu.txt
# Resumable: run it again after an interruption and the training runs go on where they stopped
# (a finished run is evaluated again, not retrained). BENCH_GPU_MINUTES sets the quality runs' budget.
set -euo pipefail
export PYTHONUNBUFFERED=1
minutes=${BENCH_GPU_MINUTES:-5}
nvidia-smi -L || true
# 1. The GPU test tier: end to end, exact resume, autocast dtypes, GPU -> CPU, compile, NCCL.
python -m pytest -q -m gpu -rs
# 2. Training throughput: precision, batches by tokens, packed against padded encoder input,
#    the compiled step, the cost of deterministic mode.
python scripts/bench_train.py --device cuda --rows default precision batching encoder compile deterministic peer \
  --steps 300 --repeats 3
# 3. Decoding throughput after 1000 training steps of each model, greedy and beam 5.
python scripts/bench_decode.py --device cuda --sentences 1000 --train-steps 1000 --repeats 3
# 4. Quality and time to the best dev BLEU of configs/eng-mar.yaml, float32 against mixed precision
#    (the log's last line says when the best was reached; evaluate prints test BLEU and chrF).
for precision in float32 auto; do
  run=runs/eng-mar-gpu-$precision
  python -m nmt train --config configs/eng-mar.yaml --device cuda --resume --minutes "$minutes" \
    --set run_dir=$run --set train.precision=$precision
  tail -n 1 $run/train.log
  python -m nmt evaluate --config configs/eng-mar.yaml --device cuda --set run_dir=$run
done
