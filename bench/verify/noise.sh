#!/usr/bin/env bash
# Run-to-run noise of `cfgopt verify`'s loss comparison: each config against an identical copy of itself
# (`cfgopt verify CFG --fixed COPY`: the same seed and data order, so the steps are compared one to one), in
# verify's offline synthetic mode; prints the largest relative difference of the loss (and grad norm) per repeat.
# The default loss tolerance (cfgopt/verify/numerics.py LOSS_TOLERANCE) is meant to be about three times the
# largest figure this prints on the H200. With PLAN=1, each config is then also verified against the output of
# `cfgopt fix --unsafe-fixes` (a full fine-tune's plan switches to pure_bf16): its loss comparison and verdict.
# Usage (from the repository root; wheels installed, PYTHONPATH set): OUT=/some/dir bash bench/verify/noise.sh
# Knobs: STEPS (20, verify's default), REPEATS (2), TARGET (h200), CACHE, LIMIT (s per verify), CONFIGS
# ("name=root:relative/config.yaml ..."), PLAN (0). A CPU dry run: TARGET=cpu STEPS=4 REPEATS=1 CONFIGS=...
set -u
cd "$(dirname "$0")/../.." || exit 2
STEPS=${STEPS:-20}; REPEATS=${REPEATS:-2}; TARGET=${TARGET:-h200}; CACHE=${CACHE:-/tmp/cfgopt-cache}
LIMIT=${LIMIT:-540}; PLAN=${PLAN:-0}; RES=${RES:-${OUT:-/tmp}/verify-noise}
CONFIGS=${CONFIGS:-"qwen3_full_sft=bench/planner:examples/train_full/qwen3_full_sft.yaml naive=bench/verify:naive.yaml"}
COMMON="--steps $STEPS --target $TARGET --mode synthetic --cache-dir $CACHE"
mkdir -p "$RES"
summary() {  # a verify JSON report -> one line: method, largest loss difference and where, grad norm, verdict
  python3 - "$1" <<'EOF'
import json, sys
try:
    loss = json.load(open(sys.argv[1]))["comparison"].get("loss") or {}
except (OSError, ValueError, KeyError) as exc:
    sys.exit(f"   no report ({type(exc).__name__})")
if "max_rel_diff" not in loss:
    sys.exit(f"   no loss comparison: {loss.get('status')} {loss.get('reason', '')}")
grad = loss.get("grad_norm_max_rel_diff")
print(f"   {loss['method']}, {loss['steps_compared']} steps: largest loss difference {loss['max_rel_diff']:+.4%}"
      f" (step {loss.get('max_rel_diff_step', '-')}), grad norm {'-' if grad is None else f'{grad:+.4%}'};"
      f" verdict {loss['status']} at tolerance {loss['tolerance']:.2%}")
EOF
}
for item in $CONFIGS; do
  name=${item%%=*}; spec=${item#*=}; root=${spec%%:*}; rel=${spec#*:}
  dir=$RES/$name; rm -rf "$dir"; mkdir -p "$dir/tree"
  cp -r "$root"/. "$dir/tree/"; chmod -R u+w "$dir/tree"; rm -f "$dir/tree/pyproject.toml"
  copy="${rel%.yaml}.same.yaml"; cp "$dir/tree/$rel" "$dir/tree/$copy"   # beside it: relative paths still resolve
  echo "== $name ($rel, $STEPS steps, $TARGET)"
  for repeat in $(seq 1 "$REPEATS"); do
    ( cd "$dir/tree" && timeout "$LIMIT" python3 -m cfgopt verify "$rel" --fixed "$copy" $COMMON \
        --json "$dir/same-$repeat.json" ) > "$dir/same-$repeat.log" 2>&1
    echo "   identical copy, repeat $repeat: verify exit $?"; summary "$dir/same-$repeat.json"
  done
  if [ "$PLAN" = 1 ]; then
    ( cd "$dir/tree" && timeout "$LIMIT" python3 -m cfgopt verify "$rel" $COMMON --json "$dir/plan.json" ) \
        > "$dir/plan.log" 2>&1
    echo "   against cfgopt fix's plan: verify exit $?"; grep -E "^(fix:|  fix:|loss |grad norm|fixed vs)" "$dir/plan.log"
    summary "$dir/plan.json"
  fi
done
