#!/usr/bin/env bash
# Device call 3 (BUDGET=180 bash device_call_ds.sh): each DeepSpeed variant in its own process (DeepSpeed's process groups do not survive
# LLaMA-Factory's destroy_process_group in one process). Two lanes: Qwen3-4B's, and the rest.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/.gpu/wt16 DISABLE_VERSION_CHECK=1 HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
R=/tmp/memres3; mkdir -p $R
H=.gpu/wt16/bench/memory/harness.py
END=$(( $(date +%s) + ${BUDGET:-200} ))
one() {  # family variant
  left=$(( END - $(date +%s) )); [ $left -lt 15 ] && return
  CFGOPT_MEMORY_VARIANT=$2 timeout $left python3 $H family $1 --out $R --work /tmp/memwork --assets .gpu/wt16/assets >> $R/$1.log 2>&1
  grep "^\[$1\] $2" $R/$1.log | tail -1
}
( for v in full_z3_gc_4x1 full_z2_gc_2x1 lora_z3_nogc_liger_4x1 lora_z2_gc_liger_8x1; do one qwen3-4b $v; done ) &
( for fv in "gemma-2-2b full_z3_gc" "qwen3-1.7b full_z2_gc" "llama-3.2-1b full_z3_gc" "qwen2.5-1.5b full_z3_gc" \
            "qwen3-1.7b full_z3_nogc_liger" "gemma-2-2b full_z2_gc_liger" "llama-3.2-1b full_z3_nogc_liger" \
            "qwen2.5-1.5b full_z3_nogc_liger"; do one $fv; done ) &
wait
ls /tmp/memwork | head
tar -czf $OUT/memres3.tar.gz -C /tmp memres3
