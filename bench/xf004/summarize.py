#!/usr/bin/env python3
"""Print the result table of bench/xf004 (markdown) from the JSON files of one or more runs.

Usage: python bench/xf004/summarize.py bench/xf004/h200 bench/xf004/cpu
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

VARIANTS = ("missing", "auto", "missing_with_batch", "batch_only")
COLUMNS = (
    ("trainer_global_step", "Trainer global_step"),
    ("trainer_optimizer_step_callbacks", "optimizer steps (callback)"),
    ("engine_global_steps", "engine global_steps"),
    ("engine_gradient_accumulation_steps", "engine gradient_accumulation_steps()"),
    ("engine_train_micro_batch_size_per_gpu", "engine train_micro_batch_size_per_gpu()"),
    ("engine_train_batch_size", "engine train_batch_size()"),
    ("engine_global_samples", "engine global_samples"),
    ("accelerator_gradient_accumulation_steps", "accelerator gradient_accumulation_steps"),
    ("losses", "logged losses"),
    ("weights_abs_sum", "sum of abs(weights)"),
)


def cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.6f}"
    if isinstance(value, list):
        return ", ".join(f"{v:.4f}" for v in value)
    return str(value)


def table(folder: Path) -> str:
    runs = {v: json.loads((folder / f"{v}.json").read_text()) for v in VARIANTS if (folder / f"{v}.json").exists()}
    if not runs:
        return f"{folder}: no results\n"
    first = next(iter(runs.values()))
    device = first.get("device", "?")
    versions = ", ".join(f"{k} {v}" for k, v in first.get("versions", {}).items())
    lines = [f"`{folder.name}/` ({device}; {versions}):", "", "| | " + " | ".join(runs) + " |"]
    lines.append("| --- |" + " --- |" * len(runs))
    for key, label in COLUMNS:
        lines.append(f"| {label} | " + " | ".join(cell(r.get(key, "-")) for r in runs.values()) + " |")
    failed = {v: r["failed"] for v, r in runs.items() if r.get("failed")}
    lines += ["", *(f"`{v}` failed: `{msg}`" for v, msg in failed.items())]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    for folder in argv or ["bench/xf004/h200", "bench/xf004/cpu"]:
        print(table(Path(folder)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
