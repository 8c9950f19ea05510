#!/usr/bin/env bash
# One device call (issue 25 and issue 23): `cfgopt doctor` on the H200 node, bare (the machine's image) and with the
# carried LLaMA-Factory wheels installed, then verify's run-to-run loss noise and a pure_bf16 plan's loss comparison
# (bench/verify/noise.sh). Usage (device tool, carry .h200wheels): bash bench/h200/device_call_doctor.sh
# Writes under $OUT: gpu.txt, doctor.txt, doctor.json, doctor_wheels.txt, lint.txt, noise.txt, verify-noise.tar.gz.
set -u
cd "$(dirname "$0")/../.." || exit 2
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt" 2>&1
export DISABLE_VERSION_CHECK=1 HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
{
  echo "## cfgopt doctor fixtures/seed (the machine's image, no wheels installed)"
  start=$(date +%s%N)
  PYTHONPATH=$PWD python3 -m cfgopt doctor fixtures/seed; echo "exit $?"
  echo "wall $(( ($(date +%s%N) - start) / 1000000 )) ms"
  echo "## facts, read with torch"
  python3 -c "import torch; print(torch.__version__, torch.version.cuda, torch.version.hip, torch.cuda.device_count(), torch.cuda.get_device_name(0))"
  python3 -m pip list 2>/dev/null | grep -iE "^(torch|flash|liger|deepspeed|transformers|peft|trl|llamafactory|bitsandbytes|triton|ninja) "
  ls /usr/local/cuda/version* 2>&1; which c++ g++ ninja nvcc; env | grep -E "VISIBLE|TORCHRUN|ROCM|HIP" | sort
} > "$OUT/doctor.txt" 2>&1
PYTHONPATH=$PWD python3 -m cfgopt doctor --format json fixtures/seed > "$OUT/doctor.json" 2>&1
PYTHONPATH=$PWD python3 -m cfgopt lint fixtures/seed > "$OUT/lint.txt" 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .h200wheels/*.whl \
    > "$OUT/install.txt" 2>&1
export PYTHONPATH=/tmp/site:$PWD
{
  echo "## cfgopt doctor fixtures/seed (LLaMA-Factory 0.9.5 wheels installed under /tmp/site)"
  python3 -m cfgopt doctor fixtures/seed; echo "exit $?"
  python3 -m cfgopt doctor --format json fixtures/seed
} > "$OUT/doctor_wheels.txt" 2>&1
OUT=$OUT RES=$OUT/verify-noise STEPS=${STEPS:-20} REPEATS=${REPEATS:-2} PLAN=1 LIMIT=${LIMIT:-200} \
  CONFIGS="qwen3_full_packed=bench/verify:qwen3_full_packed.yaml" bash bench/verify/noise.sh > "$OUT/noise.txt" 2>&1
tar -czf "$OUT/verify-noise.tar.gz" -C "$OUT" --exclude=tree verify-noise && rm -rf "$OUT/verify-noise"
cat "$OUT/noise.txt"
