#!/usr/bin/env python
"""How often each rule fires on real configs at default settings: writes docs/rule-rates.json, which
scripts/gen_rule_docs.py renders into rules/README.md ("fires on" column).

Usage: python scripts/rule_rates.py CORPUS_FOLDER [--name NAME] [--out docs/rule-rates.json] [--judged h200:1 ...]

Default settings: no project config, no dependency pins, no target, no GPU count, the default rule
selection, the newest shipped releases (`cfgopt.job.settings.Settings()`). The speed and memory rules of the
default selection judge a stated target, so the same corpus is also measured for each `--judged TARGET:GPUS`
(default: h200:1 and mi300x:8, a single-GPU and a full-node job), stored under "judged". A rule's rate is the
share of the corpus files of the kinds it reads (LLaMA-Factory YAML, DeepSpeed JSON, ...) on which it reports at least
once. A rule above `NOISY` must say why it is worth it (`Rule.worth_it`; tests/repository/test_docs.py checks).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from cfgopt.job.settings import Settings
from cfgopt.lint.engine import build_project
from cfgopt.rules import all_rules

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "rule-rates.json"
NOISY = 0.25


JUDGED = ("h200:1", "mi300x:8")


def measure(corpus: Path, settings: Settings | None = None) -> dict:
    project = build_project([corpus], settings or Settings())
    diagnostics = project.diagnostics()
    files_by_kind: Counter[str] = Counter()
    kinds_of: dict[Path, set[str]] = {}
    for src in project.sources:
        kinds_of.setdefault(src.document.path.resolve(), set()).add(src.kind.value)
    for kinds in kinds_of.values():
        files_by_kind.update(kinds)
    hit: dict[str, set[Path]] = {}
    for d in diagnostics:
        hit.setdefault(d.code, set()).add(Path(d.path).resolve())
    rules = {}
    for rule in all_rules():
        read = sorted(k.value for k in rule.kinds)
        files = sum(1 for kinds in kinds_of.values() if kinds & set(read))
        fired = len(hit.get(rule.code, ()))
        rules[rule.code] = {"files": files, "fired": fired, "rate": round(fired / files, 3) if files else 0.0}
    return {"files": len(kinds_of), "files_by_kind": dict(sorted(files_by_kind.items())), "rules": rules}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    ap.add_argument("corpus", type=Path)
    ap.add_argument("--name", default="the shared corpus (LLaMA-Factory 0.9.5 examples, axolotl, DeepSpeedExamples)")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--judged", action="append", help=f"TARGET:GPUS also measured (default: {', '.join(JUDGED)})")
    args = ap.parse_args(argv)
    if not args.corpus.is_dir():
        print(f"rule_rates: {args.corpus}: not a folder", file=sys.stderr)
        return 2
    result = {"corpus": args.name, **measure(args.corpus)}
    result["judged"] = {}
    for spec in args.judged or JUDGED:
        target, _, gpus = spec.partition(":")
        judged = measure(args.corpus, Settings(target_name=target, gpus=int(gpus or 1)))
        result["judged"][f"{target} x {gpus or 1}"] = judged["rules"]
    args.out.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    noisy = sorted(
        {c for c, r in result["rules"].items() if r["rate"] > NOISY}
        | {c for rules in result["judged"].values() for c, r in rules.items() if r["rate"] > NOISY}
    )
    print(f"wrote {args.out}: {result['files']} files; above {NOISY:.0%}: {', '.join(noisy) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
