#!/usr/bin/env bash
# Every CUDA figure of docs/benchmarks.md in one command, on a machine with an NVIDIA GPU
# (JoeyNMT rows when joeynmt is installed; see docs/benchmarks.md). Run from the repository root:
#   bash scripts/bench/bench_gpu.sh 2>&1 | tee bench-gpu.txt
# Each part runs even when one before it failed; the last lines say which failed (and the exit
# status is 1 if any did). Resumable: run it again after an interruption and the training runs
# go on where they stopped (a finished run is evaluated again, not retrained).
# BENCH_GPU_MINUTES sets the quality runs' budget; BENCH_GPU_STEPS, BENCH_GPU_REPEATS,
# BENCH_GPU_SENTENCES and BENCH_GPU_TRAIN_STEPS size the throughput parts.
#
# BENCH_GPU_SHORT=1: the short form for a 15-minute loan (start-up included): the GPU tier, then
# scripts/main.sh end to end (configs/eng-mar-gpu.yaml, the GPU recipe), then training throughput
# of the RNN eager and graphed (train.compile: reduce-overhead) and of the Transformer, 100 steps
# each, one repeat; the decoding and quality parts are left out.
set -uo pipefail
export PYTHONUNBUFFERED=1
minutes=${BENCH_GPU_MINUTES:-5}
steps=${BENCH_GPU_STEPS:-300}
repeats=${BENCH_GPU_REPEATS:-3}
sentences=${BENCH_GPU_SENTENCES:-1000}
train_steps=${BENCH_GPU_TRAIN_STEPS:-1000}
failed=()

part() {  # part NAME COMMAND...: run it, note it if it fails, go on
  local name=$1
  shift
  echo "=== $name"
  "$@" || { echo "=== $name FAILED (exit $?)"; failed+=("$name"); }
}

nvidia-smi -L || true
python -c "import torch; print('torch', torch.__version__, 'CUDA', torch.version.cuda)"
# 1. The GPU test tier: end to end, exact resume (mid-epoch, 2 layers), autocast dtypes, fp16
#    loss scaling, no host sync in the steps, the variants, GPU -> CPU, compile, NCCL.
part "gpu test tier" python -m pytest -q -m gpu -rs tests/test_gpu.py
if [ "${BENCH_GPU_SHORT:-0}" = 1 ]; then
  # the GPU recipe end to end: prepare, train (3 minutes), translate, evaluate; wall clock at the end
  part "main.sh (configs/eng-mar-gpu.yaml)" bash scripts/main.sh
  # target tokens/s: the GPU recipe's RNN eager and graphed, the Transformer at JoeyNMT's sizes
  part "training throughput (short)" python scripts/bench/bench_train.py --device cuda \
    --config configs/eng-mar-gpu.yaml --rows default compile transformer --steps 100 --repeats 1 --no-peer
  if [ ${#failed[@]} -gt 0 ]; then
    printf 'Failed parts: %s\n' "$(IFS=,; echo "${failed[*]}")"
    exit 1
  fi
  echo "Every part ran."
  exit 0
fi
# 2. Training throughput: precision, batches by tokens, packed against padded encoder input,
#    the compiled step, the cost of deterministic mode.
part "training throughput" python scripts/bench/bench_train.py --device cuda \
  --rows default precision batching encoder compile deterministic peer --steps "$steps" --repeats "$repeats"
# 3. Decoding throughput after 1000 training steps of each model, greedy and beam 5.
part "decoding throughput" python scripts/bench/bench_decode.py --device cuda --sentences "$sentences" \
  --train-steps "$train_steps" --repeats "$repeats"
# 4. Quality and time to the best dev BLEU of configs/eng-mar.yaml as one model: float32 against
#    mixed precision at the config's 64 sentences a batch, then float32 at 8,000-token batches with
#    the learning rate doubled (the log's last line says when the best was reached; evaluate prints
#    test BLEU and chrF).
quality() {  # quality NAME OVERRIDES...
  local run=runs/eng-mar-gpu-$1
  shift
  python -m nmt train --config configs/eng-mar.yaml --device cuda --resume --minutes "$minutes" \
    --set run_dir="$run" --set train.members=1 "$@" &&  # one model: its time to the best
    tail -n 1 "$run/train.log" &&
    python -m nmt evaluate --config configs/eng-mar.yaml --device cuda --set run_dir="$run" --set train.members=1
}
part "quality (float32)" quality float32 --set train.precision=float32
part "quality (auto)" quality auto --set train.precision=auto
part "quality (8000 tokens)" quality tokens8000 --set train.precision=float32 \
  --set train.batch_tokens=8000 --set train.batch_size=4000 --set train.learning_rate=0.004

if [ ${#failed[@]} -gt 0 ]; then
  printf 'Failed parts: %s\n' "$(IFS=,; echo "${failed[*]}")"
  exit 1
fi
echo "Every part ran."
