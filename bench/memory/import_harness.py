#!/usr/bin/env python3
"""Turn the harness's JSON lines (bench/memory/raw/*.jsonl) into the measured/ files compare.py reads:
`python bench/memory/import_harness.py`. Failed variants (an "error" key) are skipped; they stay in raw/.

Per variant: <name>.json ({"original": {"peak_allocated_gib", "peak_reserved_gib"}, "harness": the record}),
<name>.config.yaml (the LLaMA-Factory arguments, model path replaced by the Hub id it has the shape of),
<name>.meta.json ({"shape": the config.json dict, "family", "gpus": 1, "target": "h200",
"tokens_per_micro_batch" for unpacked runs: the largest micro-batch the run saw}) and <name>.ds.json.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
PREFIX = "h200_2026-12-03_harness"
FAMILY = {"llama": "Llama", "qwen2": "Qwen2.5", "qwen3": "Qwen3", "gemma2": "Gemma-2", "mistral": "Mistral"}
DROP = ("output_dir", "dataset_dir", "model_name_or_path", "deepspeed")


def convert(record: dict, out: Path) -> str:
    name = f"{PREFIX}_{record['family']}_{record['variant']}".replace(".", "")
    args = {k: v for k, v in record["args"].items() if k not in DROP}
    config = {"model_name_or_path": record["hub"], **args}
    if record.get("ds"):
        config["deepspeed"] = f"{name}.ds.json"
        (out / f"{name}.ds.json").write_text(json.dumps(record["ds"], indent=1) + "\n")
    header = f"# bench/memory/harness.py: {record['family']} {record['variant']} (random-init {record['hub']} shapes)\n"
    (out / f"{name}.config.yaml").write_text(header + yaml.safe_dump(config, sort_keys=False))
    shape = {k: v for k, v in record["model_config"].items() if not k.endswith("token_id")}
    meta = {
        "shape": shape,
        "family": FAMILY[shape["model_type"]],
        "gpus": 1,
        "target": "h200",
        "source": "bench/memory/harness.py on one H200 (bench/memory/README.md)",
    }
    if not args.get("packing"):
        meta["tokens_per_micro_batch"] = record["max_tokens"]
    (out / f"{name}.meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    keep = {k: v for k, v in record.items() if k not in ("args", "ds", "model_config", "traceback")}
    report = {
        "original": {
            "peak_allocated_gib": record["peak_allocated_gib"],
            "peak_reserved_gib": record.get("peak_reserved_gib"),
        },
        "harness": keep,
    }
    (out / f"{name}.json").write_text(json.dumps(report, indent=1) + "\n")
    return name


def main() -> int:
    out = HERE / "measured"
    names = []
    for path in sorted((HERE / "raw").glob("*.jsonl")):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            if record.get("error") or "peak_allocated_gib" not in record:
                continue
            names.append(convert(record, out))
    print(f"{len(set(names))} runs written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
