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
# BENCH_GPU_SHORT=1: the short form for a 15-minute loan (start-up included), in order of value and
# each part bounded: scripts/bench/gpu_loan.py (the GPU tier, the main job on the GPU recipe, both
# families' throughput eager and graphed beside JoeyNMT, the Transformer at the RNN's budget), its
# log and JSON into $OUT (docs/benchmarks.md, "A GPU loan").
set -uo pipefail
export PYTHONUNBUFFERED=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"  # the studies import the package from here
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

finish() {
  if [ ${#failed[@]} -gt 0 ]; then
    printf 'Failed parts: %s\n' "$(IFS=,; echo "${failed[*]}")"
    exit 1
  fi
  echo "Every part ran."
  exit 0
}

# The RNN and the Transformer GPU recipes on the same data for MINUTES each, then the Transformer
# at JoeyNMT's sizes: test BLEU and when each reached its best dev BLEU and the RNN's
# (scripts/studies/transformer.py; docs/transformer/results-gpu-<minutes>min.json)
race() {  # race MINUTES
  python scripts/studies/transformer.py --device cuda --minutes "$1" --seeds 1 --variants "rnn gpu recipe" \
    "transformer gpu recipe: 2 + 2 layers, feed-forward 512, dropout 0.1" \
    "transformer gpu: 3 + 3 layers, feed-forward 1024, dropout 0.3"
}

# Target tokens/s of the Transformer (JoeyNMT's sizes) and plain torch.nn.Transformer at batches of
# TOKENS under bf16 autocast, beside the RNN GPU recipe's model in float32 (its measured precision)
transformer_throughput() {  # transformer_throughput TOKENS STEPS REPEATS
  local batch=(train.batch_tokens="$1" train.batch_size=$(( $1 / 2 )))
  python scripts/bench/bench_train.py --device cuda --config configs/eng-mar-gpu.yaml --rows default \
    --set "${batch[@]}" --steps "$2" --repeats "$3" --no-peer &&
    python scripts/bench/bench_train.py --device cuda --config configs/eng-mar-gpu.yaml --rows transformer \
      --set "${batch[@]}" train.precision=auto --steps "$2" --repeats "$3" --no-peer
}

if [ "${BENCH_GPU_SHORT:-0}" = 1 ]; then
  exec python3 scripts/bench/gpu_loan.py --out "${OUT:-bench-gpu-out}"
fi
nvidia-smi -L || true
python -c "import torch; print('torch', torch.__version__, 'CUDA', torch.version.cuda)"
tier=(python -m pytest -q -m gpu -rs tests/test_gpu.py)
python -c "import xdist" 2>/dev/null && tier+=(-n 6)  # pytest-xdist where installed: six tests at a time
# 1. The GPU test tier: end to end, exact resume (mid-epoch, 2 layers; the Transformer's attention),
#    autocast dtypes, fp16 loss scaling, no host sync in the steps, the variants, GPU -> CPU, NCCL;
#    both families. Its compiled tests run last (each compiles for tens of seconds).
part "gpu test tier" "${tier[@]}" -k "not compiled"
# 2. What a new batch shape costs the Transformer's step, with cuDNN's attention and without
part "attention kernels" python scripts/bench/bench_attention_kernels.py --device cuda
part "gpu test tier, compiled" "${tier[@]}" -k compiled
# 3. Training throughput: precision, batches by tokens, packed against padded encoder input,
#    the compiled step, the cost of deterministic mode.
part "training throughput" python scripts/bench/bench_train.py --device cuda \
  --rows default precision batching encoder compile deterministic peer --steps "$steps" --repeats "$repeats"
# 4. Decoding throughput after 1000 training steps of each model, greedy and beam 5.
part "decoding throughput" python scripts/bench/bench_decode.py --device cuda --sentences "$sentences" \
  --train-steps "$train_steps" --repeats "$repeats"
# 5. Quality and time to the best dev BLEU of configs/eng-mar.yaml as one model: float32 against
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
# 6. The Transformer: throughput at 8,000 tokens a batch beside the RNN, and the two GPU recipes
#    side by side for the quality runs' budget.
part "transformer throughput" transformer_throughput 8000 "$steps" "$repeats"
part "the RNN and the Transformer, $minutes minutes each" race "$minutes"
finish
