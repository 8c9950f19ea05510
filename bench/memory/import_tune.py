#!/usr/bin/env python3
"""Turn the measured rows of a `cfgopt tune --json` report into measured/ files compare.py reads (the peak
allocated of every candidate that ran: tune's runs are verify's runner, max allocated on rank 0).

    python bench/memory/import_tune.py TUNE_JSON BASE_CONFIG NAME_PREFIX --family F --hub HUB_ID --source TEXT

BASE_CONFIG is the file tune searched from (its baseline); each row's knobs are applied to it with the
planner's own key mapping (`cfgopt.plan.space.changed_keys`), so the config compare.py estimates is the one
that ran. The model shape comes from cfgopt's shape table for HUB_ID (verify's offline mode builds exactly
that shape; meta.json names the id, which compare.py looks up). Rows already imported are written again (the
files are a function of the report). A setting measured twice (two searches) should be imported once.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from cfgopt.knowledge.model_shapes import shape_for  # noqa: E402
from cfgopt.plan import space  # noqa: E402

DROP = ("deepspeed", "output_dir", "report_to", "logging_steps", "save_steps", "plot_loss", "overwrite_output_dir")


def _label(knobs: dict) -> str:
    parts = [f"{knobs['micro']}x{knobs['ga']}", "gc" if knobs["gc"] else "nogc", knobs["attn"]]
    parts += ["liger"] if knobs["liger"] else []
    parts += [knobs["optim"].replace("_", "")] if knobs.get("optim") not in (None, "default") else []
    return "_".join(parts)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("tune_json", type=Path)
    p.add_argument("base_config", type=Path)
    p.add_argument("prefix", help="file name prefix, e.g. h200_2026-12-04_tune_qwen25-7b_full")
    p.add_argument("--family", required=True)
    p.add_argument("--hub", required=True, help="the Hub id whose shape the runs had")
    p.add_argument("--source", required=True, help="where the report is, for the meta file")
    p.add_argument("--out", type=Path, default=HERE / "measured")
    args = p.parse_args(argv)
    report = json.loads(args.tune_json.read_text())
    base_config = yaml.safe_load(args.base_config.read_text())
    if shape_for(args.hub) is None:
        raise SystemExit(f"import_tune: no shape known for {args.hub}")
    base = space.Knobs(**report["baseline"]["knobs"])
    written = 0
    for row in report["rows"]:
        if row["status"] != "measured" or row.get("peak_gib") is None:
            continue
        knobs = space.Knobs(**row["knobs"])
        config = {k: v for k, v in base_config.items() if k not in DROP}
        config.update(space.changed_keys(knobs, base))
        config["model_name_or_path"] = args.hub
        name = f"{args.prefix}_{_label(row['knobs'])}"
        header = f"# cfgopt tune on one H200 ({args.source}): candidate `{row['label']}`, verify's synthetic mode\n"
        (args.out / f"{name}.config.yaml").write_text(header + yaml.safe_dump(config, sort_keys=False))
        measured = {"peak_allocated_gib": row["peak_gib"], "peak_reserved_gib": row.get("reserved_gib")}
        (args.out / f"{name}.json").write_text(json.dumps({"original": measured, "tune_row": row}, indent=1) + "\n")
        meta = {"shape": args.hub, "family": args.family, "gpus": 1, "target": "h200", "source": args.source}
        (args.out / f"{name}.meta.json").write_text(json.dumps(meta, indent=1) + "\n")
        written += 1
    print(f"import_tune: {written} measured row(s) written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
