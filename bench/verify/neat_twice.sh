#!/usr/bin/env bash
# Issue 41's device check of verify's speed figure: the seed's neat-packed plan (SDPA gets LLaMA-Factory's 4D
# block mask) and its plain-packed twin, each measured twice with `cfgopt verify --only-original` (default 20
# steps). Done when, for every run: no "cannot measure", MFU under 100%, tokens/s within 5% of (real tokens per
# step / median step time), and the two runs of one config within 5% of each other (bench/verify/neat_check.py).
# Usage (device tool, carry .h200wheels): bash bench/verify/neat_twice.sh   (results under $OUT; NAMES=neat: one config)
set -u
cd "$(dirname "$0")/../.." || exit 2
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
if compgen -G ".h200wheels/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .h200wheels/*.whl
fi
export PYTHONPATH=/tmp/site:$PWD DISABLE_VERSION_CHECK=1 HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
CACHE=${CACHE:-/tmp/cfgopt-cache}; LIMIT=${LIMIT:-240}; TARGET=${TARGET:-h200}; STEPS=${STEPS:-20}
for name in ${NAMES:-neat packing}; do
  for run in 1 2; do
    timeout "$LIMIT" python3 -m cfgopt verify "bench/planner/neat/seed.$name.yaml" --only-original --steps "$STEPS" \
      --target "$TARGET" --mode synthetic --cache-dir "$CACHE" --quiet --json "$OUT/$name.$run.json" \
      > "$OUT/$name.$run.log" 2>&1
    echo "== $name run $run: verify exit $?"; grep -E "warm-up|median step|real tokens/s|MFU|cannot" "$OUT/$name.$run.log"
  done
done
python3 bench/verify/neat_check.py $(for name in ${NAMES:-neat packing}; do echo "$OUT/$name.1.json $OUT/$name.2.json"; done)
