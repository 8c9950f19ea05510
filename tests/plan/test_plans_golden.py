"""The plan of every bench config and shipped LLaMA-Factory example on h200 / mi300x x 1 / 8 GPUs, as text
(bench/planner/plans.golden, issue 41): a change to any plan shows here as a diff, and lands with the file
rewritten (`python bench/planner/golden.py --write`) and the rows it changes re-measured on the H200."""

from __future__ import annotations

import difflib
import importlib.util
import sys

from rule_cases import ROOT

GOLDEN_SCRIPT = ROOT / "bench" / "planner" / "golden.py"


def _golden():
    spec = importlib.util.spec_from_file_location("planner_golden", GOLDEN_SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_plan_is_the_golden_one() -> None:
    golden = _golden()
    now, saved = golden.render(), golden.GOLDEN.read_text()
    diff = "\n".join(difflib.unified_diff(saved.splitlines(), now.splitlines(), "plans.golden", "now", lineterm=""))
    assert now == saved, f"a plan changed (rewrite: python bench/planner/golden.py --write):\n{diff}"


def test_the_golden_plans_import_no_torch() -> None:
    """The golden plans run on the lint path: no torch, transformers, llamafactory or deepspeed (a few seconds)."""
    import subprocess

    code = (
        f"import runpy, sys; runpy.run_path({str(GOLDEN_SCRIPT)!r})['render'](); "
        "print('HEAVY', [n for n in ('torch', 'transformers', 'llamafactory', 'deepspeed') if n in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True).stdout
    assert "HEAVY []" in out
