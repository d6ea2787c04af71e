#!/usr/bin/env bash
# The main job: set up, then prepare -> train -> translate -> evaluate English->Marathi, printing BLEU.
# Uses configs/eng-mar-gpu.yaml on a CUDA GPU, configs/eng-mar-cpu.yaml otherwise (or CONFIG=...).
# Re-running resumes or reuses whatever is already done. MAIN_RUN_DIR, MAIN_MINUTES and MAIN_DEVICE
# set the run's folder, budget and device instead of the config's (a GPU loan's check on the CPU).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
if [ -z "${CONFIG:-}" ]; then
  if python -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)"; then
    CONFIG=configs/eng-mar-gpu.yaml
  else
    CONFIG=configs/eng-mar-cpu.yaml
  fi
fi
RUN_DIR=${MAIN_RUN_DIR:-$(python -c "from nmt.config.files import load_config; print(load_config('$CONFIG').run_dir)")}
run=(--config "$CONFIG" ${MAIN_RUN_DIR:+--set "run_dir=$MAIN_RUN_DIR"})
device=(${MAIN_DEVICE:+--device "$MAIN_DEVICE"})
echo "== config: $CONFIG   run directory: $RUN_DIR"
start=$(date +%s)
echo "== prepare"; nmt prepare "${run[@]}"
echo "== train";   nmt train "${run[@]}" "${device[@]}" ${MAIN_MINUTES:+--minutes "$MAIN_MINUTES"} --resume
echo "== translate data/eng-mar/sample.en"
nmt translate "${run[@]}" "${device[@]}" --input data/eng-mar/sample.en --output "$RUN_DIR/sample.mr" \
  --plot-attention "$RUN_DIR/attention" --plot-count 3
paste data/eng-mar/sample.en "$RUN_DIR/sample.mr" | sed 's/\t/  =>  /'
echo "== evaluate (test split, all references)"
nmt evaluate "${run[@]}" "${device[@]}"
echo "== done in $(( $(date +%s) - start ))s"
