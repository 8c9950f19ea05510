"""Collect bench/planner/run_h200.sh's reports into results.json (issue 13): per config, the original's real
tokens/s (`cfgopt verify --only-original`), the `cfgopt fix --unsafe-fixes` output's (tune's baseline run, which
is that output measured by verify's runner) and tune's winner's, with the commands that made them.

Usage: python bench/planner/collect.py RESULTS_DIR TARGET STEPS WARMUP BUDGET > results.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def _read(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _fixes(log: Path) -> list[str]:
    try:
        lines = log.read_text().splitlines()
    except OSError:
        return []
    return [line.split(": fixed: ", 1)[1] for line in lines if ": fixed: " in line]


def _method(config: Path) -> dict[str, Any]:
    """The config's `finetuning_type` and `stage`, as written."""
    import yaml

    try:
        data = yaml.safe_load(config.read_text())
    except (OSError, yaml.YAMLError):
        return {}
    return {k: data[k] for k in ("finetuning_type", "stage") if isinstance(data, dict) and k in data}


def collect_one(folder: Path, target: str, steps: str, warmup: str, budget: str, patience: str = "3") -> dict[str, Any]:
    name = folder.name
    original, tune = _read(folder / "original.json"), _read(folder / "tune.json")
    rel = (folder / "config.txt").read_text().strip() if (folder / "config.txt").exists() else "?"
    base, winner = tune.get("baseline") or {}, tune.get("winner") or {}
    fix_tps, tune_tps = base.get("tokens_per_s"), winner.get("tokens_per_s") or base.get("tokens_per_s")
    common = f"--steps {steps} --target {target} --mode synthetic"
    method = _method(folder / "original" / rel)
    return {
        "config": name,
        "path": rel,
        "finetuning_type": method.get("finetuning_type", "lora"),  # LLaMA-Factory's defaults when not set
        "stage": method.get("stage", "sft"),
        "original_tokens_per_s": (original.get("original") or {}).get("real_tokens_per_s"),
        "fix_tokens_per_s": fix_tps,
        "tune_tokens_per_s": tune_tps,
        "fix_vs_tune": (fix_tps / tune_tps) if fix_tps and tune_tps else None,
        "command": (
            f"cfgopt fix --unsafe-fixes --fix-references --write --target {target} --gpus 1 "
            f"{rel} (on a copy); cfgopt verify {rel} --only-original {common}; "
            f"cfgopt tune {rel} (the fix output) {common} --warmup {warmup} --budget {budget} --patience {patience}"
        ),
        "original_error": (original.get("original") or {}).get("error")
        or (None if original else "not run here (SKIP_ORIGINAL or cut by the time limit)"),
        "original_mfu": (original.get("original") or {}).get("mfu"),
        "fixes": _fixes(folder / "fix.log"),
        "tune_winner": winner.get("label"),
        "tune_changes": tune.get("changes"),
        "tune_rows": [
            {k: r.get(k) for k in ("label", "status", "tokens_per_s", "peak_gib", "est_peak_gib", "wall_s")}
            for r in tune.get("rows", [])
        ],
        "device": tune.get("device"),
    }


def main(argv: list[str]) -> int:
    folder, target, steps, warmup, budget = Path(argv[0]), *argv[1:5]
    patience = argv[5] if len(argv) > 5 else "3"
    rows = [
        collect_one(p, target, steps, warmup, budget, patience)
        for p in sorted(folder.iterdir())
        if (p / "fix.log").exists()
    ]
    print(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
