"""What `cfgopt tune` prints and writes about a search: the table of candidates, the verdict, the JSON report."""

from __future__ import annotations

import argparse
import json
import sys

from cfgopt.text.writer import write_report
from cfgopt.tune import search

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def _f(value: Any, pattern: str) -> str:
    return "-" if value is None else pattern.format(value)


def row_json(row: search.Row, base_tps: float | None) -> dict[str, Any]:
    c, m = row.candidate, row.measurement
    tps = row.tokens_per_s
    return {
        "index": c.index,
        "label": c.knobs.label(),
        "knobs": c.knobs.as_dict(),
        "baseline": c.baseline,
        "status": row.status,
        "cached": row.cached,
        "reason": row.reason,
        "run_order": row.order,
        "prior": round(c.prior, 4),
        "est_peak_gib": c.est_peak_gib,
        "tokens_per_s": tps,
        "vs_baseline": (tps / base_tps) if tps and base_tps else None,
        "peak_gib": m.peak_gib if m else None,
        "reserved_gib": m.reserved_gib if m else None,
        "wall_s": m.wall_s if m else None,
        "error": m.error if m else None,
        "key": c.key,
    }


def table(result: search.SearchResult, on_cpu: bool = False) -> str:
    """The candidates measured and not; `on_cpu`: the runs went to a CPU (fp32, `Knobs.label`)."""
    base_tps = result.baseline.tokens_per_s
    head = (
        f"{'':2}{'#':>3}  {'candidate':60} {'status':22} {'tokens/s':>9} {'vs base':>8} "
        f"{'peak GiB':>9} {'need GiB':>8} {'run s':>6}  note"
    )
    lines = [head]
    for row in result.rows:
        c, m = row.candidate, row.measurement
        tps = row.tokens_per_s
        mark = "*" if result.winner is not None and row is result.winner else ""
        label = c.knobs.label(on_cpu) + (" (baseline)" if c.baseline else "")
        status = row.status + (" (cached)" if row.cached else "")
        lines.append(
            f"{mark:2}{c.index:>3}  {label:60} {status:22} {_f(tps, '{:,.0f}'):>9} "
            f"{_f(tps / base_tps if tps and base_tps else None, '{:.2f}x'):>8} "
            f"{_f(m.peak_gib if m else None, '{:.1f}'):>9} {_f(c.est_peak_gib, '{:.1f}'):>8} "
            f"{_f(m.wall_s if m else None, '{:.0f}'):>6}  {row.reason}"
        )
    return "\n".join(lines)


def _measured(result: search.SearchResult) -> int:
    return sum(row.status == search.MEASURED for row in result.rows)


def _not_run(result: search.SearchResult) -> str:
    """The other candidates by status, and what to do where the budget stopped them: "59 others: 40 pruned: memory,
    19 not run: budget; --budget MINUTES runs more"."""
    counts: dict[str, int] = {}
    for row in result.rows:
        if row is not result.baseline:
            counts[row.status] = counts.get(row.status, 0) + 1
    if not counts:
        return "no other candidate"
    said = ", ".join(f"{n} {status}" for status, n in sorted(counts.items(), key=lambda item: -item[1]))
    budget = search.NOT_RUN_BUDGET in counts
    return f"{sum(counts.values())} others: {said}" + ("; --budget MINUTES runs more" if budget else "")


def verdict(result: search.SearchResult, memory_note: str, gpus: int) -> int:
    """What the search found, printed; 1 when nothing could be measured or the config as it is crashed."""
    base_tps, winner = result.baseline.tokens_per_s, result.winner
    print(
        f"searched {sum(r.order is not None for r in result.rows)} of {len(result.rows)} candidates: "
        f"{result.spent_s:.0f} s of runs now, {result.search_s * gpus:.0f} device-seconds in all (cached included); "
        f"{memory_note}"
    )
    code = 0
    if winner is None:
        print("no candidate could be measured: nothing to change")
        code = 1
    elif winner is result.baseline and _measured(result) == 1:
        # nothing was compared: "the fastest measured" would read as a verdict on the config (a 2-minute budget spent
        # on its own 79 s run on the H200, bench/planner/README.md)
        print(f"only the config as it is was measured, nothing compared with it ({_not_run(result)}): nothing changed")
    elif winner is result.baseline:
        print("the config as it is was the fastest measured: nothing to change")
    else:
        gain = f" ({winner.tokens_per_s / base_tps:.2f}x the baseline)" if base_tps and winner.tokens_per_s else ""
        print(f"winner: #{winner.candidate.index} {winner.candidate.knobs.label()}{gain}")
    if result.baseline.status == search.CRASHED:
        sys.stderr.write(
            f"cfgopt tune: the config as it is crashed: {result.baseline.reason}; try `cfgopt fix` first\n"
        )
        code = 1
    return code


def write_json(
    args: argparse.Namespace,
    result: search.SearchResult,
    platform: Any,
    changes: dict[str, Any],
    gpus: int,
    warmup: int,
    memory_note: str,
) -> None:
    """The JSON report (`--json FILE`, or `-` for stdout): the search's settings, every row, the winner's changes."""
    base_tps, winner = result.baseline.tokens_per_s, result.winner
    report = {
        "config": str(args.config),
        "device": platform.device,
        "gpus": gpus,
        "steps": args.steps,
        "warmup": warmup,
        "budget_s": result.budget_s,
        "spent_s": result.spent_s,
        "search_s": result.search_s,
        "gpu_seconds": result.search_s * gpus,
        "stopped": result.stopped,
        "memory": memory_note,
        "platform_notes": platform.notes,
        "priors": search.PRIORS,
        "baseline": row_json(result.baseline, base_tps),
        "winner": row_json(winner, base_tps) if winner else None,
        "changes": changes,
        "rows": [row_json(r, base_tps) for r in result.rows],
    }
    text = json.dumps(report, indent=2, default=str)
    if str(args.json) == "-":
        print(text)
    else:
        write_report(args.json, text)
