#!/usr/bin/env python3
"""cfgopt's memory estimate against measured peaks: `python bench/memory/compare.py [--write]`.

Reads every `bench/memory/measured/<name>.json` that `cfgopt verify --json` wrote (its "original" summary
holds `peak_allocated_gib`), with `<name>.config.yaml` beside it (the exact LLaMA-Factory arguments of the
run; else the JSON's "config" path) and `<name>.meta.json`: {"shape": a model id or a config.json dict,
"gpus": 1, "target": "h200"}, optionally "longest_sequence" (the longest padded sequence of an unpacked run)
or "tokens_per_micro_batch". Without either, an unpacked run's tokens come from the JSON's per-step padded
token counts, else the estimator's default fill. Prints a Markdown table (estimate vs measured allocated
peak, error per row, median absolute error, worst) and, with --write, writes bench/memory/results.md.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from cfgopt import memory, schema  # noqa: E402
from cfgopt.job import lf_values, packing_on  # noqa: E402
from cfgopt.model_shapes import _from_config, shape_for  # noqa: E402
from cfgopt.targets import TARGETS  # noqa: E402

HERE = Path(__file__).resolve().parent
MEASURED = HERE / "measured"
TARGET_MEDIAN, TARGET_WORST = 0.05, 0.15


def _runs(folder: Path) -> list[Path]:
    skip = (".meta.json", ".ds.json")

    def natural(p: Path) -> list[Any]:
        return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", p.name)]

    return sorted((p for p in folder.glob("*.json") if not p.name.endswith(skip)), key=natural)


def _fill(config: dict[str, Any], meta: dict[str, Any], report: dict[str, Any]) -> tuple[float | None, str]:
    if packing_on(config):
        return None, "packed"
    cutoff = config["cutoff_len"]
    bsz = config["per_device_train_batch_size"]
    accum = config.get("gradient_accumulation_steps", 1) or 1
    if meta.get("tokens_per_micro_batch"):
        return min(1.0, meta["tokens_per_micro_batch"] / (bsz * cutoff)), "meta tokens"
    if meta.get("longest_sequence"):
        return min(1.0, meta["longest_sequence"] / cutoff), f"longest sequence {meta['longest_sequence']}"
    steps = (report.get("per_step") or {}).get("original") or []
    padded = [s.get("padded_tokens") for s in steps if s.get("padded_tokens")]
    if padded:
        longest = max(padded) / accum / bsz
        return min(1.0, longest / cutoff), f"per-step padded tokens (~{longest:.0f}/sequence)"
    return None, f"default fill {memory.DEFAULT_FILL:.0%}"


def compare_one(path: Path) -> dict[str, Any]:
    name = path.name[: -len(".json")]
    report = json.loads(path.read_text())
    meta_path = path.with_name(f"{name}.meta.json")
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    config_path = path.with_name(f"{name}.config.yaml")
    if not config_path.exists() and report.get("config"):
        config_path = Path(report["config"])
        config_path = config_path if config_path.is_absolute() else path.parent / config_path
    config = lf_values(yaml.safe_load(config_path.read_text()), schema.llamafactory())  # the values LF sees
    ds = None
    if isinstance(config.get("deepspeed"), str):
        ds = json.loads((config_path.parent / config["deepspeed"]).read_text())
    elif isinstance(config.get("deepspeed"), dict):
        ds = config["deepspeed"]
    spec = meta.get("shape") or config.get("model_name_or_path")
    shape = _from_config(spec, name) if isinstance(spec, dict) else shape_for(str(spec), config_path.parent)
    if shape is None:
        raise SystemExit(f"{path.name}: unknown model shape {spec!r}: give meta.json a config.json dict")
    target = TARGETS[meta.get("target", "h200")]
    fill, tokens_from = _fill(config, meta, report)
    est = memory.estimate(config, shape, target, int(meta.get("gpus", 1)), ds, fill=fill)
    measured = report["original"]["peak_allocated_gib"]
    return {
        "name": name,
        "variant": meta.get("variant", ""),
        "transcribed": bool(meta.get("transcribed") or report.get("transcribed")),
        "setting": (
            f"{est.finetuning_type} {est.micro_batch}x{est.gradient_accumulation}, {est.tokens} tok"
            f"{' packed' if est.packing else ''}, GC {'on' if est.gradient_checkpointing else 'off'}, "
            f"{est.attention}{', liger' if est.liger else ''}"
            f"{f', ZeRO-{est.zero_stage}' if est.zero_stage is not None else ''}"
            f"{', offload' if est.offloaded_gib else ''}"
        ),
        "tokens_from": tokens_from,
        "estimate": est.peak_allocated_gib,
        "measured": measured,
        "error": (est.peak_allocated_gib - measured) / measured,
    }


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| run | setting | tokens from | estimate GiB | measured GiB | error |",
        "| --- | --- | --- | ---: | ---: | ---: |",
    ]
    for r in rows:
        label = r["name"] + (" (transcribed)" if r["transcribed"] else "")
        lines.append(
            f"| {label} | {r['setting']} | {r['tokens_from']} | {r['estimate']:.1f} | {r['measured']:.1f} "
            f"| {r['error']:+.1%} |"
        )
    errors = [abs(r["error"]) for r in rows]
    if errors:
        worst = max(rows, key=lambda r: abs(r["error"]))
        lines += [
            "",
            f"Median absolute error {statistics.median(errors):.1%} (target <= {TARGET_MEDIAN:.0%}); "
            f"worst {abs(worst['error']):.1%} on {worst['name']} (target <= {TARGET_WORST:.0%}); {len(rows)} runs.",
        ]
    return "\n".join(lines)


def summary(rows: list[dict[str, Any]]) -> tuple[float, float]:
    errors = [abs(r["error"]) for r in rows]
    return statistics.median(errors), max(errors)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--measured", type=Path, default=MEASURED)
    ap.add_argument("--write", action="store_true", help="also write bench/memory/results.md")
    args = ap.parse_args(argv)
    rows = [compare_one(p) for p in _runs(args.measured)]
    if not rows:
        print(f"no measured runs in {args.measured}")
        return 1
    text = table(rows)
    print(text)
    if args.write:
        transcribed = sum(r["transcribed"] for r in rows)
        (HERE / "results.md").write_text(
            "# Memory estimate vs measured peak (allocated)\n\n"
            "Made by `python bench/memory/compare.py --write` from `bench/memory/measured/`. "
            f"{transcribed} of {len(rows)} rows are transcribed by hand from "
            "`bench/h200/measurements.md` (one H200, LLaMA-Factory 0.9.5, Llama-3-8B shapes, LoRA "
            "rank 8 on all linears), not produced by `cfgopt verify`; unpacked rows use the longest padded "
            "sequence that file reports (832 tokens). Formulas: docs/memory.md.\n\n" + text + "\n"
        )
    median, worst = summary(rows)
    return 0 if median <= TARGET_MEDIAN and worst <= TARGET_WORST else 1


if __name__ == "__main__":
    sys.exit(main())
