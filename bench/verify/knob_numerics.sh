#!/usr/bin/env bash
# Numerics of the planner's knobs: a config against copies of itself that change one setting each
# (`cfgopt verify CFG --fixed VARIANT`: same seed and data order, steps compared one to one), in verify's offline
# synthetic mode; prints each comparison's largest relative loss difference and verdict. bench/verify/results.md
# records what it printed on the H200; cfgopt/plan/space.py refuses what trains worse (PURE_BF16_NUMERICS).
# Usage (repository root; wheels installed, PYTHONPATH set): OUT=/some/dir bash bench/verify/knob_numerics.sh
# Knobs: STEPS (20), TARGET (h200), LIMIT (s per verify), CONFIG (root:relative.yaml),
# VARIANTS ("name:key=value,key=value ..."; a value is YAML). CPU dry run: TARGET=cpu STEPS=3 CONFIG=... VARIANTS=...
set -u
cd "$(dirname "$0")/../.." || exit 2
STEPS=${STEPS:-20}; TARGET=${TARGET:-h200}; CACHE=${CACHE:-/tmp/cfgopt-cache}; LIMIT=${LIMIT:-200}
RES=${RES:-${OUT:-/tmp}/knob-numerics}; CONFIG=${CONFIG:-bench/verify:qwen3_full_packed.yaml}
VARIANTS=${VARIANTS:-"gc_off:disable_gradient_checkpointing=true optim_8bit:optim=adamw_bnb_8bit optim_adafactor:optim=adafactor"}
root=${CONFIG%%:*}; rel=${CONFIG#*:}
rm -rf "$RES"; mkdir -p "$RES/tree"; cp -r "$root"/. "$RES/tree/"; chmod -R u+w "$RES/tree"; rm -f "$RES/tree/pyproject.toml"
echo "== $rel against one-setting variants ($STEPS steps, $TARGET)"
for item in $VARIANTS; do
  name=${item%%:*}; changes=${item#*:}
  python3 - "$RES/tree/$rel" "$RES/tree/${rel%.yaml}.$name.yaml" "$changes" <<'PY'
import sys, yaml
config = yaml.safe_load(open(sys.argv[1]))
for change in sys.argv[3].split(","):
    key, value = change.split("=", 1)
    config[key] = yaml.safe_load(value)
yaml.safe_dump(config, open(sys.argv[2], "w"), sort_keys=False)
PY
  # the original's own spread (a second seed) is measured once, with the first variant (SPREAD_FIRST=0: never)
  spread=off; [[ "${SPREAD_FIRST:-1}" == 1 && -z "${spread_done:-}" ]] && spread=on && spread_done=1
  ( cd "$RES/tree" && timeout "$LIMIT" python3 -m cfgopt verify "$rel" --fixed "${rel%.yaml}.$name.yaml" --steps "$STEPS" \
      --target "$TARGET" --mode synthetic --cache-dir "$CACHE" --spread "$spread" --json "$RES/$name.json" ) \
      > "$RES/$name.log" 2>&1
  echo "-- $name ($changes): verify exit $?"
  grep -E "^(fixed vs|loss |grad norm|loss verdict|judged|peak)" "$RES/$name.log" | sed 's/^/   /'
done
