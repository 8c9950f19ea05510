#!/usr/bin/env bash
# One device call (issue 32): bf16 stochastic rounding (torchao's 8-bit AdamW, `pure_bf16`) on the H200.
# 1. the numerics of pure bf16 and of pure bf16 with stochastic rounding against bf16 autocast + AdamW on the
#    Qwen3-4B packed config (bench/verify/knob_numerics.sh; the original's own spread, a second seed, measured
#    with the first variant), for verify's verdict table (bench/verify/verdicts.py);
# 2. the full fine-tune plans made for a node without torchao (node_bnb.txt) against those made with it
#    (node_torchao.txt): Llama-3-8B (fp16, stock ZeRO-3 JSON) and Qwen3-4B (held out), speed and loss.
# Usage (device tool, carry .h200wheels): bash bench/h200/device_call_sr.sh   (results under $OUT)
set -u
cd "$(dirname "$0")/../.." || exit 2
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .h200wheels/*.whl
export PYTHONPATH=/tmp/site:$PWD DISABLE_VERSION_CHECK=1 HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
STEPS=${STEPS:-20}; CACHE=${CACHE:-/tmp/cfgopt-cache}; LIMIT=${LIMIT:-170}
if [[ "${PART:-all}" != plans ]]; then
  VARIANTS="pure_bf16:pure_bf16=true,bf16=false sr:pure_bf16=true,bf16=false,optim=adamw_torch_8bit,optim_args=bf16_stochastic_round=True" \
    STEPS=$STEPS LIMIT=$LIMIT RES=$OUT/numerics bash bench/verify/knob_numerics.sh > "$OUT/numerics.txt" 2>&1
  cat "$OUT/numerics.txt"
fi
if [[ "${PART:-all}" != numerics ]]; then
  cd bench/planner/sr || exit 2
  for c in ${SR_CONFIGS:-qwen3_full_sft llama3_full_sft_fp16}; do
    timeout "$LIMIT" python3 -m cfgopt verify "examples/train_full/$c.bnb.yaml" --fixed "examples/train_full/$c.torchao.yaml" \
      --steps "$STEPS" --target h200 --mode synthetic --cache-dir "$CACHE" --spread off --json "$OUT/$c.json" \
      > "$OUT/$c.log" 2>&1
    echo "== $c: verify exit $?"; grep -E "^(fixed vs|loss |grad norm|loss verdict|judged|peak|tokens|MFU)" "$OUT/$c.log"
  done
fi
