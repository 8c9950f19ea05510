"""Judge `cfgopt tune` against the exhaustive grid (issue 9's bar: the pick reaches >= 95% of the grid's best
tokens/s in less than a third of the grid's GPU time).

    python bench/tune/compare.py GRID.json TUNE.json [--md OUT.md] [--json OUT.json]

GRID.json is bench/tune/grid.py's output, TUNE.json `cfgopt tune --json`'s. Tune's pick is scored with the
grid's own measurement of the same candidate (matched by cache key, else by knobs) so both sides of the
ratio carry the same run-to-run noise; tune's own figure for its pick is reported beside it. GPU time is
run wall seconds (start-up included) x GPUs: for tune every run its search used (cached ones included), for
the grid every candidate it ran.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

TARGET_SPEED = 0.95
TARGET_COST = 1 / 3


def compare(grid: dict, tune: dict) -> dict:
    rows = [r for r in grid["rows"] if r.get("status") not in (None, "pending")]
    measured = [r for r in rows if r.get("tokens_per_s")]
    best = max(measured, key=lambda r: r["tokens_per_s"], default=None)
    pick = tune.get("winner")
    out: dict = {
        "grid_candidates": len(grid["rows"]),
        "grid_done": len(rows),
        "grid_best": {"label": best["label"], "tokens_per_s": best["tokens_per_s"]} if best else None,
        "tune_pick": {"label": pick["label"], "tokens_per_s": pick.get("tokens_per_s")} if pick else None,
        "tune_runs": sum(1 for r in tune["rows"] if r.get("run_order") is not None),
        "tune_gpu_seconds": tune.get("gpu_seconds"),
        "grid_gpu_seconds": sum((r.get("wall_s") or 0.0) for r in rows) * grid.get("gpus", 1),
        "notes": [],
    }
    if grid.get("steps") != tune.get("steps") or grid.get("warmup") != tune.get("warmup"):
        out["notes"].append(
            f"steps/warm-up differ (grid {grid.get('steps')}/{grid.get('warmup')}, "
            f"tune {tune.get('steps')}/{tune.get('warmup')}): keys will not match, knobs are used"
        )
    if len(rows) < len(grid["rows"]):
        out["notes"].append(f"the grid is incomplete ({len(rows)} of {len(grid['rows'])}): its best may be higher")
    if best and pick:
        same = next((r for r in rows if r.get("key") == pick.get("key")), None) or next(
            (r for r in rows if r.get("knobs") == pick.get("knobs")), None
        )
        grid_tps = same.get("tokens_per_s") if same else None
        out["pick_in_grid_tokens_per_s"] = grid_tps
        out["pick_vs_grid_best"] = grid_tps / best["tokens_per_s"] if grid_tps else None
        out["pick_own_vs_grid_best"] = (pick.get("tokens_per_s") or 0.0) / best["tokens_per_s"]
        if same is None:
            out["notes"].append("tune's pick is not in the grid; its own measurement is used")
        elif not grid_tps:
            out["notes"].append(f"tune's pick {same.get('status')} in the grid run")
    score = out.get("pick_vs_grid_best") or out.get("pick_own_vs_grid_best")
    out["speed_ratio"] = score
    grid_s = out["grid_gpu_seconds"]
    out["gpu_time_fraction"] = (out["tune_gpu_seconds"] or 0.0) / grid_s if grid_s else None
    out["passes"] = bool(
        score is not None
        and score >= TARGET_SPEED
        and out["gpu_time_fraction"] is not None
        and out["gpu_time_fraction"] < TARGET_COST
    )
    return out


def render(result: dict) -> str:
    def pct(v):
        return "-" if v is None else f"{v:.1%}"

    best, pick = result.get("grid_best") or {}, result.get("tune_pick") or {}
    lines = [
        "# cfgopt tune vs the exhaustive grid",
        "",
        "| | value | bar |",
        "| --- | --- | --- |",
        f"| grid best | {best.get('label', '-')}: {best.get('tokens_per_s') or 0:,.0f} tokens/s | |",
        f"| tune's pick | {pick.get('label', '-')}: {pick.get('tokens_per_s') or 0:,.0f} tokens/s (tune's run) | |",
        f"| pick in the grid | {result.get('pick_in_grid_tokens_per_s') or 0:,.0f} tokens/s | |",
        f"| pick / grid best | {pct(result.get('speed_ratio'))} | >= {TARGET_SPEED:.0%} |",
        f"| tune GPU s / grid GPU s | {result.get('tune_gpu_seconds') or 0:,.0f} / {result['grid_gpu_seconds']:,.0f}"
        f" = {pct(result.get('gpu_time_fraction'))} | < {TARGET_COST:.1%} |",
        f"| runs | tune {result['tune_runs']}, grid {result['grid_done']} of {result['grid_candidates']} | |",
        f"| verdict | {'PASS' if result['passes'] else 'FAIL'} | |",
    ]
    lines += [f"- note: {n}" for n in result["notes"]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="tune's pick vs the exhaustive grid")
    p.add_argument("grid", type=Path)
    p.add_argument("tune", type=Path)
    p.add_argument("--md", type=Path, default=None)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    result = compare(json.loads(args.grid.read_text()), json.loads(args.tune.read_text()))
    text = render(result)
    sys.stdout.write(text)
    if args.md:
        args.md.write_text(text)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0 if result["passes"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
