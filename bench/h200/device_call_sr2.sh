#!/usr/bin/env bash
# The second device call of issue 32: (1) the plan's packing as it is now, `neat_packing` (samples kept apart),
# against plain `packing` on the seed's plan (bench/planner/neat: the same file but for that key; 8 steps);
# (2) `cfgopt tune` from the stochastic-rounding plan of the held-out Qwen3-4B full SFT (bench/planner/sr), so the
# planner bench's fix/tune for it is measured.
# Usage (device tool, carry .h200wheels): bash bench/h200/device_call_sr2.sh   (results under $OUT)
set -u
cd "$(dirname "$0")/../.." || exit 2
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .h200wheels/*.whl
export PYTHONPATH=/tmp/site:$PWD DISABLE_VERSION_CHECK=1 HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
CACHE=${CACHE:-/tmp/cfgopt-cache}; LIMIT=${LIMIT:-200}
if [[ "${PART:-all}" != tune ]]; then
  ( cd bench/planner/neat && timeout "$LIMIT" python3 -m cfgopt verify seed.packing.yaml --fixed seed.neat.yaml \
      --steps "${NEAT_STEPS:-8}" --target h200 --mode synthetic --cache-dir "$CACHE" --json "$OUT/neat.json" ) \
      > "$OUT/neat.log" 2>&1
  echo "== neat vs packing: verify exit $?"; grep -E "^(fixed vs|loss |loss verdict|judged|peak|tokens|MFU)" "$OUT/neat.log"
fi
if [[ "${PART:-all}" != neat ]]; then
  rm -rf /tmp/tune && cp -r bench/planner/sr /tmp/tune && chmod -R u+w /tmp/tune
  ( cd /tmp/tune && timeout "${TUNE_LIMIT:-330}" python3 -m cfgopt tune examples/train_full/qwen3_full_sft.torchao.yaml \
      --steps 4 --warmup 1 --target h200 --mode synthetic --cache-dir "$CACHE" --budget "${BUDGET:-4.5}" \
      --patience 3 --json "$OUT/tune.json" --quiet ) > "$OUT/tune.log" 2>&1
  echo "== tune from the SR plan (Qwen3-4B full SFT): exit $?"; tail -25 "$OUT/tune.log"
fi
