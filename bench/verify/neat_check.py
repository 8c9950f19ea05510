"""Issue 41's checks of verify's speed figure on reports of `cfgopt verify --json` (bench/verify/neat_twice.sh):
each run measurable, MFU under 100%, tokens/s within 5% of (real tokens per step / median step time) over the
steady steps, and each pair of runs of one config (consecutive arguments) within 5%. Exit 1 when one fails.

Usage: python bench/verify/neat_check.py A.1.json A.2.json [B.1.json B.2.json ...]
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path


def check(path: str) -> tuple[float | None, list[str]]:
    data = json.loads(Path(path).read_text())
    summary, steps = data["original"], data["per_step"]["original"]
    why = summary.get("cannot_measure") or summary.get("error")
    if why:
        return None, [f"{path}: cannot measure: {why}"]
    steady = steps[summary["warmup_steps_excluded"] :]
    per_step = statistics.mean(s["real_tokens"] for s in steady) / statistics.median(s["seconds"] for s in steady)
    rate, mfu = summary["real_tokens_per_s"], summary.get("mfu")
    print(
        f"{path}: {rate:,.0f} tokens/s, per step / median {per_step:,.0f} ({rate / per_step - 1:+.1%}), "
        f"MFU {mfu if mfu is None else f'{mfu:.1%}'}, warm-up {summary['warmup_steps_excluded']} of {len(steps)}"
    )
    failures = [f"{path}: MFU {mfu:.1%}"] if mfu is not None and mfu >= 1 else []
    if abs(rate / per_step - 1) > 0.05:
        failures.append(f"{path}: tokens/s {rate:,.0f} vs per step / median {per_step:,.0f}")
    return rate, failures


def main(paths: list[str]) -> int:
    failures: list[str] = []
    rates = []
    for path in paths:
        rate, failed = check(path)
        rates.append(rate)
        failures += failed
    for first, second, path in zip(rates[::2], rates[1::2], paths[::2], strict=False):
        if first and second:
            print(f"{path} and its repeat: {second / first:.3f}x")
            if abs(second / first - 1) > 0.05:
                failures.append(f"{path}: two runs differ by {second / first - 1:+.1%}")
    print("\n".join(failures) or "all checks pass")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
