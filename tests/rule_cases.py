"""The per-rule fixture cases in fixtures/rules/<CODE>/<case>/ and how to run them.

A case folder holds the input files, optionally `case.json` ({"args": [...cfgopt options...],
"all_rules": false}), the
expected diagnostics in `expected.txt` (one `file:line:column CODE severity` per line), and, when the
case has fixes, `fixed/` with every input file as `cfgopt fix --write --unsafe-fixes` must leave it.
`python scripts/update_rule_fixtures.py` rewrites expected.txt and fixed/ from the current behaviour;
review the diff before committing it.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

from cfgopt.cli import main

ROOT = Path(__file__).resolve().parent.parent
CASES_DIR = ROOT / "fixtures" / "rules"
META_FILES = {"case.json", "expected.txt"}


def all_cases() -> list[Path]:
    return sorted(p for p in CASES_DIR.glob("*/*") if p.is_dir())


def case_args(case: Path) -> list[str]:
    """The case's cfgopt options. A case runs its own rule alone (`--select CODE`, as ruff's and SQLFluff's
    rule tests do), so another rule's findings or fixes never change it; `"all_rules": true` opts out."""
    meta = json.loads((case / "case.json").read_text()) if (case / "case.json").exists() else {}
    args = list(meta.get("args", []))
    if not meta.get("all_rules"):
        args += ["--select", case.parent.name]
    return args


def input_files(case: Path) -> list[Path]:
    return sorted(p for p in case.iterdir() if p.is_file() and p.name not in META_FILES)


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def lint_lines(folder: Path, args: list[str]) -> list[str]:
    files = [str(f) for f in input_files(folder)]
    _, out, _ = run_cli(["lint", "--format", "json", *files, *args])
    lines = []
    for d in json.loads(out)["diagnostics"]:
        rel = Path(d["file"]).resolve().relative_to(folder.resolve())
        lines.append(f"{rel}:{d['line']}:{d['column']} {d['code']} {d['severity']}")
    return sorted(lines)


def copy_inputs(case: Path, dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    for f in input_files(case):
        shutil.copy2(f, dest / f.name)
    meta = case / "case.json"
    if meta.exists():
        shutil.copy2(meta, dest / "case.json")
    return dest


def fix_in(folder: Path, args: list[str]) -> int:
    files = [str(f) for f in input_files(folder)]
    code, _, _ = run_cli(["fix", "--write", "--unsafe-fixes", *files, *args])
    return code
