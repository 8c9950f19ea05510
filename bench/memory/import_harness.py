#!/usr/bin/env python3
"""Turn the harness's JSON lines (bench/memory/raw/*.jsonl) into the measured/ files compare.py reads:
`python bench/memory/import_harness.py`. Failed variants (an "error" key) are skipped; they stay in raw/.
`--add knobs.tar.gz` (what a device call such as device_call_knobs.sh brings back; a folder works too) first
appends the records of its `*.jsonl` files to raw/<family>.jsonl (a record already there is not added twice).
A record's "date" (the harness writes it since the knobs runs; 2026-12-03 before) names its files.

Per variant: <name>.json ({"original": {"peak_allocated_gib", "peak_reserved_gib"}, "harness": the record}),
<name>.config.yaml (the LLaMA-Factory arguments, model path replaced by the Hub id it has the shape of),
<name>.meta.json ({"shape": the config.json dict, "family", "gpus": 1, "target": "h200",
"tokens_per_micro_batch" for unpacked runs: the largest micro-batch the run saw; for pairwise stages (DPO)
"longest_sequence": the padded length of its chosen and rejected sequences, which the estimate counts twice})
and <name>.ds.json. Every LLaMA-Factory argument of the run (stage, optim, pure_bf16, freeze_trainable_layers,
...) is kept in <name>.config.yaml, from which compare.py rebuilds the configuration it estimates.
"""

from __future__ import annotations

import argparse
import json
import sys
import tarfile
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
FIRST_DATE = "2026-12-03"  # the harness's first device calls, whose records carry no date
PAIRWISE = ("rm", "dpo", "kto")  # stages whose micro-batch holds two sequences per example
FAMILY = {"llama": "Llama", "qwen2": "Qwen2.5", "qwen3": "Qwen3", "gemma2": "Gemma-2", "mistral": "Mistral"}
DROP = ("output_dir", "dataset_dir", "model_name_or_path", "deepspeed")


def convert(record: dict, out: Path) -> str:
    name = f"h200_{record.get('date', FIRST_DATE)}_harness_{record['family']}_{record['variant']}".replace(".", "")
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
    if args.get("stage") in PAIRWISE:
        meta["longest_sequence"] = record["max_shape"][-1]
    elif not args.get("packing"):
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


def _jsonl_texts(source: Path) -> dict[str, str]:
    """The `*.jsonl` files of a device call's tarball or folder, by file name."""
    if source.is_dir():
        return {p.name: p.read_text() for p in sorted(source.rglob("*.jsonl"))}
    texts = {}
    with tarfile.open(source) as tar:
        for member in tar.getmembers():
            handle = tar.extractfile(member) if member.isfile() and member.name.endswith(".jsonl") else None
            if handle is not None:
                texts[Path(member.name).name] = handle.read().decode()
    return texts


def add(source: Path, raw: Path) -> int:
    """Append the harness records of `source` to raw/<family>.jsonl; returns how many were new."""
    added = 0
    raw.mkdir(parents=True, exist_ok=True)
    for text in _jsonl_texts(source).values():
        for line in text.splitlines():
            if not line.strip():
                continue
            record = json.loads(line)
            if "family" not in record or "variant" not in record:
                continue  # not a harness record
            target = raw / f"{record['family']}.jsonl"
            known = set(target.read_text().splitlines()) if target.exists() else set()
            line = json.dumps(record)
            if line in known:
                continue
            with target.open("a") as handle:
                handle.write(line + "\n")
            added += 1
    return added


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--add", type=Path, action="append", default=[], help="a device call's tarball or folder")
    ap.add_argument("--raw", type=Path, default=HERE / "raw")
    ap.add_argument("--measured", type=Path, default=HERE / "measured")
    args = ap.parse_args(argv)
    for source in args.add:
        print(f"{add(source, args.raw)} new records from {source} appended to {args.raw}")
    out = args.measured
    out.mkdir(parents=True, exist_ok=True)
    names = []
    for path in sorted(args.raw.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            if record.get("error") or "peak_allocated_gib" not in record:
                continue
            names.append(convert(record, out))
    print(f"{len(set(names))} runs written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
