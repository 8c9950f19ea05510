#!/usr/bin/env bash
# GPU campaign on one H200 (device tool). Usage: bash bench/gpu/run_campaign.sh PART
#   PART=verify   : bench/verify (a) naive vs fixed, (b) the seed as meant (crash expected: no batch size),
#                   (b') the seed as meant with a batch size vs fixed; plus the 1.5B full fine-tune points.
#   PART=memory   : the 8B LoRA memory-calibration grid (bench/memory/configs), original runs only.
#   PART=tune     : bench/tune grid and `cfgopt tune` on the same config.
# Everything lands in $OUT/results.tar.gz (JSON reports, plots, logs, and each run's exact config).
set -u
PART=${1:-verify}
STEPS=${STEPS:-12}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD DISABLE_VERSION_CHECK=1 HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
RES=/tmp/results/$PART; mkdir -p "$RES"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$RES/gpu.txt"
python3 -c "import torch, transformers, llamafactory; print(torch.__version__, transformers.__version__)" 2>&1 | tail -1 | tee -a "$RES/gpu.txt"
CACHE=/tmp/cfgopt-cache
v() {  # name, config, extra args...
  local name=$1 cfg=$2; shift 2
  local start=$SECONDS
  timeout 540 python3 -m cfgopt verify "$cfg" --steps "$STEPS" --target h200 --cache-dir $CACHE \
      --json "$RES/$name.json" --plot "$RES/$name.png" "$@" > "$RES/$name.log" 2>&1
  echo "$name exit=$? $((SECONDS-start))s" | tee -a "$RES/summary.txt"
  tail -16 "$RES/$name.log"
  cp "$cfg" "$RES/$name.config.yaml"
}
case $PART in
  verify)
    v naive bench/verify/naive.yaml
    v seed_intent bench/verify/seed_intent.yaml --only-original
    v seed_intent_batch bench/verify/seed_intent_batch.yaml
    for c in full15b_ddp full15b_z3; do v "$c" "bench/memory/configs/$c.yaml" --only-original; done
    ;;
  memory)
    for f in bench/memory/configs/lora8b_*.yaml bench/memory/configs/full15b_z3_offload.yaml; do
      n=$(basename "$f" .yaml); v "$n" "$f" --only-original
    done
    ;;
  tune)
    bash bench/tune/run_h200.sh "$RES"
    ;;
esac
tar -czf "$OUT/results.tar.gz" -C /tmp/results "$PART"
cp "$RES/summary.txt" "$OUT/summary.txt"
