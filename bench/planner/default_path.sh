#!/usr/bin/env bash
# Issue 22 on one H200: what the default path writes, measured. For each config, two copies fixed with
# `cfgopt fix --write --unsafe-fixes --fix-references --target h200 --gpus 1`: "before" with `--ignore PF,MEM`
# (the default selection before issue 22: no speed or memory advice, so no plan) and "after" with no selection
# flag at all (the default since issue 22); then `cfgopt verify BEFORE --fixed AFTER` runs both in verify's
# offline synthetic mode on this GPU and compares tokens/s and peak memory.
# Usage (from the repository root; wheels installed, PYTHONPATH set): OUT=/some/dir bash bench/planner/default_path.sh
set -u
cd "$(dirname "$0")/../.." || exit 2
STEPS=${STEPS:-6}; TARGET=${TARGET:-h200}; CACHE=${CACHE:-/tmp/cfgopt-cache}; RES=${RES:-$OUT/default-path}
LIMIT=${LIMIT:-540}
CONFIGS=${CONFIGS:-"seed=fixtures/seed:llama3_lora_sft.yaml lora_fp16_zero3_offload=tests/data/lora_fp16_zero3_offload:llama3_lora_fp16.yaml"}
mkdir -p "$RES"
for item in $CONFIGS; do
  name=${item%%=*}; spec=${item#*=}; root=${spec%%:*}; rel=${spec#*:}
  dir=$RES/$name; rm -rf "$dir"; mkdir -p "$dir/before" "$dir/after"
  for side in before after; do
    cp -r "$root"/. "$dir/$side/"; chmod -R u+w "$dir/$side"; rm -f "$dir/$side/pyproject.toml"
    extra=""; [ "$side" = before ] && extra="--ignore PF,MEM"
    # shellcheck disable=SC2086
    ( cd "$dir/$side" && python3 -m cfgopt fix --write --unsafe-fixes --fix-references --target "$TARGET" --gpus 1 \
        $extra "$rel" ) > "$dir/$side.fix.log" 2>&1
  done
  echo "== $name"; tail -2 "$dir/before.fix.log"; tail -2 "$dir/after.fix.log"
  ( cd "$dir/before" && timeout "$LIMIT" python3 -m cfgopt verify "$rel" --fixed "$dir/after/$rel" --steps "$STEPS" \
      --target "$TARGET" --mode synthetic --cache-dir "$CACHE" --json "$dir/verify.json" ) > "$dir/verify.log" 2>&1
  echo "   verify: exit $?"; tail -15 "$dir/verify.log"
done
