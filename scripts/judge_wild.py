#!/usr/bin/env python
"""Judge the wild set (tests/data/wild/) with the real tools and write tests/data/wild/verdicts.jsonl.

Each config listed in `sources.jsonl` gets two verdicts from LLaMA-Factory 0.9.5 / transformers 5.6.0 /
DeepSpeed 0.19.8 on CPU (through tests/support/oracle_harness.py, the oracle tests' harness):

- `plain_ok` / `plain_error`: the plain parser. LLaMA-Factory YAML: OmegaConf's load, then
  `HfArgumentParser(<train or infer dataclasses>).parse_dict(cfg, allow_extra_keys=False)`, which includes the
  dataclasses' `__post_init__` checks. DeepSpeed JSON: strict `json.loads` plus DeepSpeed's duplicate-key load.
- `ok` / `error` / `stage`: the real tool's verdict. YAML: `get_train_args` / `get_infer_args` (the parser plus
  every start-up check that runs on CPU), then the Enum/Literal fields and the chat template as the code that
  reads them checks them. JSON: "auto" filled as the HF Trainer fills it, then `DeepSpeedConfig`. The
  `deepspeed:` key of a YAML is not followed (as for the shared real-config corpus); each JSON is judged on its own.

The target is an 80 GB NVIDIA GPU (`h100`): these configs were written for NVIDIA clusters. Run from the
repository root with the real packages installed::

    DISABLE_VERSION_CHECK=1 python scripts/judge_wild.py [--check]

`--check` does not write; it exits 1 when a verdict differs from the committed file.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
WILD = ROOT / "tests" / "data" / "wild"
TARGET = "h100"
sys.path.insert(0, str(ROOT / "tests" / "support"))

import oracle_harness as H  # noqa: E402


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0][:300] if text.strip() else ""


def plain_lf(cfg: Any) -> tuple[bool, str]:
    """`parse_dict` alone: the check `llamafactory-cli` runs first."""
    if not isinstance(cfg, dict):
        return False, f"TypeError: the config is a {type(cfg).__name__}, not a mapping"
    classes = H.train_arg_classes() if H.lf_group(cfg) == "train" else H.infer_arg_classes()
    plain = {k: v for k, v in cfg.items() if k != "deepspeed"}  # not followed, as in the full verdict
    try:
        with H._device(TARGET), H._in_empty_dir():
            H._lf().HfArgumentParser(classes).parse_dict(plain, allow_extra_keys=False)
    except Exception as exc:  # noqa: BLE001 - whatever the parser raises is its verdict
        return False, H._err(exc)
    return True, ""


def judge_lf(path: Path) -> dict[str, Any]:
    try:
        cfg = H.load_lf_yaml(path)
    except Exception as exc:  # noqa: BLE001 - OmegaConf refuses the YAML
        error = H._err(exc)
        return {"ok": False, "error": error, "stage": "load", "plain_ok": False, "plain_error": error}
    plain_ok, plain_error = plain_lf(cfg)
    if not isinstance(cfg, dict):
        return {"ok": False, "error": plain_error, "stage": "load", "plain_ok": False, "plain_error": plain_error}
    verdict = H.lf_verdict_detail(cfg, H.lf_group(cfg), TARGET)
    out = {"ok": verdict.ok, "error": verdict.error, "stage": verdict.stage}
    out.update(plain_ok=plain_ok, plain_error=plain_error, group=H.lf_group(cfg))
    if verdict.host_issues:
        out["host_issues"] = verdict.host_issues
    return out


def judge_ds(path: Path) -> dict[str, Any]:
    text = path.read_text(encoding="utf-8", errors="replace")
    try:
        H.load_ds_text(text)
        plain_ok, plain_error = True, ""
    except Exception as exc:  # noqa: BLE001 - json / DeepSpeed's duplicate-key check
        plain_ok, plain_error = False, H._err(exc)
    verdict = H.ds_verdict_detail(path, target=TARGET)
    return {
        "ok": verdict.ok,
        "error": verdict.error,
        "stage": verdict.stage,
        "plain_ok": plain_ok,
        "plain_error": plain_error,
    }


def judge_all() -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in (WILD / "sources.jsonl").read_text(encoding="utf-8").splitlines() if line]
    out = []
    for row in rows:
        path = WILD / row["file"]
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            verdict = judge_ds(path) if row["kind"] == "deepspeed" else judge_lf(path)
        verdict["error"] = _first_line(verdict["error"])
        verdict["plain_error"] = _first_line(verdict["plain_error"])
        out.append({"file": row["file"], "kind": row["kind"], **verdict})
    return out


def render(verdicts: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(v, ensure_ascii=False, sort_keys=True) + "\n" for v in verdicts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    ap.add_argument("--check", action="store_true", help="do not write; exit 1 on a changed verdict")
    args = ap.parse_args(argv)
    text = render(judge_all())
    target = WILD / "verdicts.jsonl"
    if args.check:
        same = target.exists() and target.read_text(encoding="utf-8") == text
        print("judge_wild: verdicts are current" if same else "judge_wild: verdicts changed (rerun without --check)")
        return 0 if same else 1
    target.write_text(text, encoding="utf-8")
    rows = [json.loads(line) for line in text.splitlines()]
    bad = sum(not r["ok"] for r in rows)
    print(f"wrote {target}: {len(rows)} configs, {len(rows) - bad} accepted, {bad} rejected")
    return 0


if __name__ == "__main__":
    sys.exit(main())
