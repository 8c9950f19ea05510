#!/usr/bin/env bash
# Device call (BUDGET=420 bash bench/memory/device_call_accum.sh, from the repository root, the wheels of
# h200_measurements.md in .whl and prebuilt assets in .gpu/wt16/assets): gradient accumulation under ZeRO-2,
# Qwen3-4B full, 1 x 2, GC on and off; each DeepSpeed variant in its own process (device_call_ds.sh says why).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD DISABLE_VERSION_CHECK=1 HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
R=$OUT/memres_accum; mkdir -p "$R"
END=$(( $(date +%s) + ${BUDGET:-420} ))
for v in full_z2_gc_1x2 full_z2_nogc_liger_1x2; do
  left=$(( END - $(date +%s) )); [ $left -lt 30 ] && break
  CFGOPT_MEMORY_VARIANT=$v timeout $left python3 bench/memory/harness.py family qwen3-4b --out "$R" \
      --work /tmp/memwork --assets .gpu/wt16/assets >> "$R/qwen3-4b.log" 2>&1
  grep "^\[qwen3-4b\] $v" "$R/qwen3-4b.log" | tail -1
done
