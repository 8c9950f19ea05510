#!/usr/bin/env bash
# One device call (issue 23): the numerics of the planner's optimizer knobs (bench/verify/knob_numerics.sh), then
# the planner bench's held-out Qwen2.5-7B full SFT (fix output and tune from it, bench/planner/run_h200.sh).
# Usage (device tool, carry .h200wheels): bash bench/h200/device_call_7b.sh   (results under $OUT)
set -u
cd "$(dirname "$0")/../.." || exit 2
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .h200wheels/*.whl
export PYTHONPATH=/tmp/site:$PWD DISABLE_VERSION_CHECK=1 HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
RES=$OUT/knob-numerics bash bench/verify/knob_numerics.sh > "$OUT/knob_numerics.txt" 2>&1
cat "$OUT/knob_numerics.txt"
CONFIGS="qwen25_7b_full=bench/planner:examples/train_full/qwen25_7b_full_sft_ds3.yaml" SKIP_ORIGINAL=qwen25_7b_full \
  STEPS=4 WARMUP=1 BUDGET=${BUDGET:-3} PATIENCE=2 LIMIT=${LIMIT:-280} RES=$OUT/p bash bench/planner/run_h200.sh \
  > "$OUT/planner.txt" 2>&1
tail -30 "$OUT/planner.txt"
