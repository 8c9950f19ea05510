#!/usr/bin/env bash
# Device call of issue 23 (bench/memory/README.md): the memory-for-speed knobs on one H200, from the repository
# root with the wheels in .h200wheels/ (carried):   bash bench/memory/device_call_knobs.sh
# CPU dry run (tiny shapes, the Python that runs it, no pip, no DeepSpeed/bitsandbytes runs):
#   OUT=/tmp/knobs-dry PYTHON=.venv/bin/python bash bench/memory/device_call_knobs.sh --tiny
# harness.py --plan knobs (KNOBS_PLAN) in two concurrent lanes, each one process per model for the runs without
# DeepSpeed, then one process per DeepSpeed run (DeepSpeed does not initialise twice in one process):
#   lane a: Qwen3-1.7B (full pure bf16 GC on/off, adamw_bnb_8bit, paged_adamw_8bit, adafactor, DPO LoRA/full,
#           freeze last/first 2 layers), then its ZeRO-2 and ZeRO-3 offload runs
#   lane b: Mistral-7B (the same knobs, full DPO in pure bf16), then Llama-3.2-1B's ZeRO-2/3 offload runs
# Peaks (<= ~35 GiB in lane a, <= ~85 GiB in lane b) fit the GPU together; max_memory_allocated counts one
# process's tensors, so concurrent lanes do not change the figures. A global deadline of BUDGET seconds (default
# 440) after the install: the harness starts no variant it cannot finish, a process gets at most what is left
# plus GRACE (30 s), and what is done is kept. Writes $OUT/knobs.tar.gz (knobs/: <family>.jsonl, one record per
# run, logs, nvidia-smi and host memory samples) and $OUT/summary.txt;
# `python bench/memory/import_harness.py --add knobs.tar.gz` turns the records into measured/ files.
set -u
TINY=""; [ "${1:-}" = "--tiny" ] && TINY="--tiny"
PY=${PYTHON:-python3}
OUT=${OUT:-/tmp/knobs-out}; mkdir -p "$OUT"
if [ -z "$TINY" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
      .h200wheels/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
export DISABLE_VERSION_CHECK=1 HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
R=/tmp/knobs W=/tmp/knobswork${TINY:+-tiny}  # the tiny models must not stand in for real ones
rm -rf "$R" "$W"; mkdir -p "$R" "$W"  # no model of an earlier (perhaps killed) call
START=$(date +%s); END=$(( START + ${BUDGET:-440} )); GRACE=${GRACE:-30}
export CFGOPT_MEMORY_DEADLINE=$END
H=bench/memory/harness.py; OPTS="--plan knobs --out $R --work $W $TINY"

if [ -z "$TINY" ]; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$R/gpu.txt"
  nvidia-smi --query-gpu=memory.used --format=csv,noheader -l 3 > "$R/smi.csv" 2>&1 &
  SMI=$!
  # DeepSpeedCPUAdam (what accelerate runs under optimizer offload) is a C++ op built at first use: build it
  # now, beside the first runs; if it cannot be built the offload runs step the Trainer's AdamW on the host.
  # (Its output goes to the log, not the call's stdout, so that a build still running at the end holds no pipe.)
  ( timeout 300 $PY -c "from deepspeed.ops.op_builder import CPUAdamBuilder; CPUAdamBuilder().load()"
    echo $? > "$R/cpu_adam_build.rc" ) > "$R/cpu_adam_build.log" 2>&1 &
fi
( while sleep 3; do free -m | awk '/^Mem:/ {print $3}'; done ) > "$R/host_used_mib.txt" 2>&1 &
FREE=$!

left() { echo $(( END - $(date +%s) )); }
family() {  # the runs of a model without DeepSpeed, in one process
  [ "$(left)" -lt 20 ] && { echo "[$1] not started (deadline)" | tee -a "$R/$1.log"; return; }
  CFGOPT_MEMORY_NO_DS=1 timeout $(( $(left) + GRACE )) $PY $H family $1 $OPTS >> "$R/$1.log" 2>&1
  echo "[$1] exit $?"; grep "^\[$1\]" "$R/$1.log"
}
offload() {  # one DeepSpeed run per process; waits for the CPU Adam build
  while [ -z "$TINY" ] && [ ! -f "$R/cpu_adam_build.rc" ] && [ "$(left)" -gt 40 ]; do sleep 2; done
  if [ -z "$TINY" ] && [ "$(cat "$R/cpu_adam_build.rc" 2>/dev/null)" != "0" ]; then
    export CFGOPT_MEMORY_DS_TORCH_OPTIM=1
  fi
  [ "$(left)" -lt 40 ] && { echo "[$1] $2: not started (deadline)" | tee -a "$R/$1.$2.log"; return; }
  CFGOPT_MEMORY_VARIANT=$2 timeout $(( $(left) + GRACE )) $PY $H family $1 $OPTS >> "$R/$1.$2.log" 2>&1
  echo "[$1] $2 exit $?"; grep "^\[$1\]" "$R/$1.$2.log"
}
( family qwen3-1.7b; offload qwen3-1.7b full_z2_offload_gc; offload qwen3-1.7b full_z3_offload_gc ) &
A=$!
( family mistral-7b; offload llama-3.2-1b full_z2_offload_gc; offload llama-3.2-1b full_z3_offload_gc ) &
B=$!
wait $A $B
kill $FREE ${SMI:-} 2>/dev/null

{
  echo "knobs device call, $(date -u), runs took $(( $(date +%s) - START )) s of a budget of ${BUDGET:-440} s"
  [ -f "$R/cpu_adam_build.rc" ] && echo "DeepSpeedCPUAdam build exit $(cat "$R/cpu_adam_build.rc")"
  [ -s "$R/smi.csv" ] && echo "GPU used max: $(sort -n "$R/smi.csv" | tail -1)"
  echo "host used max MiB: $(sort -n "$R/host_used_mib.txt" | tail -1)"
  echo "family variant peak_allocated_gib max_shape wall_s error"
  cat "$R"/*.jsonl 2>/dev/null | $PY -c "
import json, sys
for r in map(json.loads, sys.stdin):
    print(r['family'], r['variant'], round(r.get('peak_allocated_gib', -1), 2), r.get('max_shape'),
          round(r.get('wall_s', 0), 1), (r.get('error') or '')[:300])"
  echo "not run:"; grep -h "skipped\|not started" "$R"/*.log 2>/dev/null
} > "$OUT/summary.txt" 2>&1
tar -czf "$OUT/knobs.tar.gz" -C /tmp knobs
cat "$OUT/summary.txt"
