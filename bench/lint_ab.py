#!/usr/bin/env python3
"""Before/after start-up of `cfgopt lint`, robust to a machine whose speed drifts: two revisions installed
into fresh virtual environments (`pip install .`, as pre-commit installs a hook), timed run by run in turn
with the interpreter's own floor, so every command sees the same machine.

Usage: python bench/lint_ab.py OLD_REV [--new REV] [--runs 30] [-- lint ARGS...]
  OLD_REV / --new: git revisions (default new: the working tree as it is); default case: the seed YAML with
  the DeepSpeed JSON it names. Prints a Markdown table (median and min wall seconds) for bench/results.md.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CASE = ["lint", "fixtures/seed/llama3_lora_sft.yaml"]


def source_tree(rev: str | None, into: Path) -> Path:
    """The files of `rev` (None: the working tree) in `into`."""
    if rev is None:
        return ROOT
    archive = subprocess.run(["git", "archive", rev], cwd=ROOT, capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def install(source: Path, venv: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": ""}
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--compile", str(source)]
    subprocess.run(pip, check=True, env=env, stderr=subprocess.DEVNULL)
    return venv / "bin"


def one_run(argv: list[str]) -> float:
    start = time.perf_counter()
    quiet = subprocess.DEVNULL
    child = subprocess.Popen(argv, cwd=ROOT, stdout=quiet, stderr=quiet)
    os.wait4(child.pid, 0)
    return time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("--new", default=None, help="a git revision (default: the working tree)")
    ap.add_argument("--runs", type=int, default=30)
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    a = ap.parse_args(argv[:split])
    case = argv[split + 1 :] or DEFAULT_CASE  # after `--`: the cfgopt arguments (default: the seed pair)
    with tempfile.TemporaryDirectory(prefix="cfgopt-ab-") as tmp:
        base = Path(tmp)
        old_bin = install(source_tree(a.old, base / "old-src"), base / "old")
        new_bin = install(source_tree(a.new, base / "new-src"), base / "new")
        commands = {
            f"cfgopt {a.old}": [str(old_bin / "cfgopt"), *case],
            f"cfgopt {a.new or 'working tree'}": [str(new_bin / "cfgopt"), *case],
            "floor: `python -c pass`": [str(new_bin / "python"), "-c", "pass"],
            "floor: `python -c 'import yaml'`": [str(new_bin / "python"), "-c", "import yaml"],
        }
        times: dict[str, list[float]] = {label: [] for label in commands}
        for _ in range(a.runs):
            for label, argv in commands.items():
                times[label].append(one_run(argv))
    print(f"`cfgopt {' '.join(case)}`, {a.runs} cold runs of each command, in turn\n")
    print("| command | median s | min s |\n| --- | --- | --- |")
    for label, values in times.items():
        print(f"| {label} | {statistics.median(values):.3f} | {min(values):.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
