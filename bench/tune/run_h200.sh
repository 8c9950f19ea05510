#!/usr/bin/env bash
# Issue 9 on one H200: the exhaustive grid over micro batch (global batch kept), gradient checkpointing and
# Liger for bench/tune/lora8b_packed.yaml, then `cfgopt tune` on the same space with a third of the grid's
# time, then the comparison. Results go straight to $OUT (grid, tune, cache, comparison).
set -u
CFG=bench/tune/lora8b_packed.yaml
COMMON="--steps 5 --warmup 2 --target h200 --knobs micro,gc,liger"
python3 bench/tune/grid.py $CFG $COMMON --cache-dir /tmp/cfgopt-cache --out "$OUT/grid" --max-minutes 6 2>&1 | tail -25
python3 -m cfgopt tune $CFG $COMMON --cache-dir /tmp/cfgopt-cache --budget 1.9 --cache "$OUT/tune.cache.json" \
    --json "$OUT/tune.json" 2>&1 | tail -30
python3 bench/tune/compare.py "$OUT/grid.json" "$OUT/tune.json" --md "$OUT/compare.md" 2>&1 | tail -12
