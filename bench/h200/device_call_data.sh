#!/usr/bin/env bash
# One device call (issue 36): the data profile against runs on the H200.
# 1. the plan's expected gain against the measured one on two length profiles (bench/planner/data/short, long:
#    Qwen2.5-7B LoRA SFT, cutoff 2048, 4 x 2): `cfgopt lint --show-fixes` prints the expected gain (the data term
#    of cfgopt/plan/data_speed.py), `cfgopt verify --apply-fixes` measures the plan against the config as written;
# 2. the memory estimate with profiled data against the run: DPO and KTO (bench/planner/data/pairwise, kto:
#    Qwen2.5-7B LoRA rank 128, cutoff 1024, answers of 400 tokens +-3%): `cfgopt estimate --format json` (sized by
#    the profile) against `cfgopt verify --only-original`'s peak; the run's own tokens per step are in its JSON,
#    so the estimate can be redone at the run's lengths (`--fill`) where the synthetic tokenizer counts otherwise.
# Data: generated here by bench/planner/data/make_data.py (seeded). Model: random init with the real shapes.
# Usage (device tool, carry .h200wheels): bash bench/h200/device_call_data.sh   (results under $OUT)
set -u
cd "$(dirname "$0")/../.." || exit 2
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .h200wheels/*.whl
export PYTHONPATH=/tmp/site:$PWD DISABLE_VERSION_CHECK=1 HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
CACHE=${CACHE:-/tmp/cfgopt-cache}; LIMIT=${LIMIT:-150}; STEPS=${STEPS:-8}
python3 bench/planner/data/make_data.py "${ROWS:-4000}" || exit 2
ROOT=$PWD
if [[ "${PART:-all}" != memory ]]; then
  for d in short long; do
    cd "$ROOT/bench/planner/data/$d" || exit 2
    python3 -m cfgopt lint train.yaml --target h200 --gpus 1 --format json > "$OUT/$d.lint.json" 2>/dev/null
    timeout "$LIMIT" python3 -m cfgopt verify train.yaml --apply-fixes --steps "$STEPS" --target h200 --mode auto \
      --cache-dir "$CACHE" --spread off --json "$OUT/$d.json" > "$OUT/$d.log" 2>&1
    echo "== $d: verify exit $?"; grep -oE "expected [0-9.]+x" "$OUT/$d.lint.json" | head -1
    grep -E "^(fixed vs|judged|peak|tokens|MFU)" "$OUT/$d.log"
  done
fi
if [[ "${PART:-all}" != gain ]]; then
  for d in pairwise kto; do
    cd "$ROOT/bench/planner/data/$d" || exit 2
    python3 -m cfgopt estimate train.yaml --target h200 --gpus 1 --format json > "$OUT/$d.estimate.json" 2>/dev/null
    timeout "$LIMIT" python3 -m cfgopt verify train.yaml --only-original --steps 4 --target h200 --mode auto \
      --cache-dir "$CACHE" --json "$OUT/$d.json" > "$OUT/$d.log" 2>&1
    echo "== $d: verify exit $?"; grep -E "peak_allocated_gib|required_gib" "$OUT/$d.estimate.json" | head -2
    grep -E "^(peak|tokens)" "$OUT/$d.log"
  done
fi
