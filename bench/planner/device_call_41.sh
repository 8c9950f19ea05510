#!/usr/bin/env bash
# Issue 41 on one H200 (or H100: the reply names the card; compare only within one call). PART selects:
#   verify  - verify counts what it runs: the seed's neat-packed plan (bench/planner/neat/seed.neat.yaml) measured
#             twice, separately (two runs of one config must agree within 5%; tokens/s within 5% of tokens per step
#             / median step; MFU under 100%), then plain packing at the same shape once (neat vs plain packing)
#   rows    - bench/planner/run_h200.sh over CONFIGS: the plan (`cfgopt fix --unsafe-fixes`) and a tune of BUDGET
#             minutes started from it; collect.py writes results.json (plan / best found)
# Usage (device tool, carry .h200wheels): PART=verify bash bench/planner/device_call_41.sh; PART=rows CONFIGS=...
set -u
cd "$(dirname "$0")/../.." || exit 2
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .h200wheels/*.whl
export PYTHONPATH=/tmp/site:$PWD DISABLE_VERSION_CHECK=1 HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
CACHE=${CACHE:-/tmp/cfgopt-cache}; LIMIT=${LIMIT:-200}; STEPS=${STEPS:-10}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$OUT/device.txt" 2>&1
if [[ "${PART:-verify}" == *verify* ]]; then
  for run in neat1 neat2 packing; do
    file=seed.neat.yaml; [[ $run == packing ]] && file=seed.packing.yaml
    ( cd bench/planner/neat && timeout "$LIMIT" python3 -m cfgopt verify "$file" --only-original --steps "$STEPS" \
        --target h200 --mode synthetic --cache-dir "$CACHE" --json "$OUT/verify_$run.json" ) > "$OUT/verify_$run.log" 2>&1
    echo "== $run ($file): verify exit $?"; grep -iE "tokens/s|MFU|median|warm|cannot measure|peak" "$OUT/verify_$run.log" | head -8
  done
fi
if [[ "${PART:-verify}" == *rows* ]]; then
  STEPS=${ROW_STEPS:-8} WARMUP=${WARMUP:-2} BUDGET=${BUDGET:-3} PATIENCE=${PATIENCE:-4} LIMIT=${ROW_LIMIT:-260} \
    SKIP_ORIGINAL=${SKIP_ORIGINAL:-all} RES=$OUT/rows bash bench/planner/run_h200.sh > "$OUT/rows.txt" 2>&1
  tail -40 "$OUT/rows.txt"
fi
# the device returns at most 8 files: everything else travels as one archive (the fixed configs, logs, tune JSON)
( cd "$OUT" && find . -mindepth 1 -maxdepth 1 ! -name '*.tgz' ! -name device.txt ! -name 'rows.txt' -print0 \
    | tar czf "all_${PART:-verify}.tgz" --null -T - && find . -mindepth 1 -maxdepth 1 ! -name '*.tgz' \
    ! -name device.txt ! -name rows.txt -exec rm -rf {} + )
ls -la "$OUT"
