#!/usr/bin/env bash
# Every CUDA figure of docs/benchmarks.md in one command, on a machine with one NVIDIA GPU
# (JoeyNMT rows when joeynmt is installed; see docs/benchmarks.md). Run from the repository root:
#   bash scripts/bench_gpu.sh 2>&1 | tee bench-gpu.txt
set -euo pipefail
export PYTHONUNBUFFERED=1
# Training throughput: this project's rows, packed against padded encoder input, the compiled decoder step.
python scripts/bench_train.py --device cuda --rows default equivalent fast encoder compile peer --steps 300 --repeats 3
# Decoding throughput after 1000 training steps of each model, greedy and beam 5.
python scripts/bench_decode.py --device cuda --sentences 1000 --train-steps 1000 --repeats 3
# Time to the best dev BLEU of the default eng-mar config (the log's last line says when it was reached).
python -m nmt prepare --config configs/eng-mar.yaml --set run_dir=runs/eng-mar-gpu
python -m nmt train --config configs/eng-mar.yaml --device cuda --set run_dir=runs/eng-mar-gpu
python -m nmt evaluate --config configs/eng-mar.yaml --set run_dir=runs/eng-mar-gpu --device cuda
