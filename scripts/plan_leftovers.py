#!/usr/bin/env python
"""What `cfgopt lint` still says about a speed plan's output (issue 32: "after `cfgopt fix --write
--unsafe-fixes`, `lint` shows no MEM003/MEM004/LF027 warning on a plan's output").

For every LLaMA-Factory training config under the folders given (default: fixtures/ and bench/planner/examples),
and each `--judged TARGET:GPUS` (default: h200 and mi300x on 1, 2 and 8 GPUs): the config is copied into a
temporary folder with its DeepSpeed JSON (same relative layout, writable), `cfgopt fix --write --unsafe-fixes --target T
--gpus N CONFIG JSON` is run on the copy, then `cfgopt lint --format json` with the same options. Listed:

- left: every warning or error still reported whose code is MEM*, PF* or LF027 (the speed and memory rules,
  and Liger under ZeRO-3), and every planned rule's (`cfgopt.plan.speed_knobs.PLANNED_CODES`) finding;
- caused: every warning or error whose (file, code) was not reported before the fix: the fixed output is
  worse than its input there (by the plan, or by another fix: bench/planner/leftovers.md says which).

Usage: python scripts/plan_leftovers.py [FOLDER_OR_FILE ...] [--judged h200:8 ...] [--out leftovers.json]
Exit 1 when anything is listed. Each identical (config, JSON) pair is checked once.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import shutil
import stat
import sys
import tempfile
from collections import Counter
from pathlib import Path

import yaml

from cfgopt.cli import main as cfgopt_main
from cfgopt.plan.speed_knobs import PLANNED_CODES
from cfgopt.project.project import resolve_reference

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))
from rule_cases import shared_files  # noqa: E402  (a rule case's data kept once: fixtures/rules/*/*/shared.txt)

DEFAULT_FOLDERS = (ROOT / "fixtures", ROOT / "bench" / "planner" / "examples")
JUDGED = ("h200:1", "h200:2", "h200:8", "mi300x:1", "mi300x:2", "mi300x:8")
LOUD = ("warning", "error")
SKIPPED_FOLDERS = {"fixed"}  # a rule case's expected fix output: no input


def watched(code: str) -> bool:
    return code.startswith(("MEM", "PF")) or code == "LF027" or code in PLANNED_CODES


def training_config(path: Path) -> dict | None:
    """The config's mapping where it is a LLaMA-Factory training run (`do_train` true), else None."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError, OSError):
        return None
    if not isinstance(data, dict) or data.get("do_train") is not True or not data.get("model_name_or_path"):
        return None
    return data


def configs(paths: list[Path]) -> list[Path]:
    out = []
    for path in paths:
        found = [path] if path.is_file() else sorted([*path.rglob("*.yaml"), *path.rglob("*.yml")])
        out += [p for p in found if not SKIPPED_FOLDERS & set(p.parts) and training_config(p) is not None]
    return out


def layout(config: Path) -> tuple[Path, list[Path], list[Path]]:
    """The folder to copy from, the files to name (the config and the JSON it names, where found) and the other
    files to copy (the config's folder: a local model's config.json)."""
    files = [config]
    ref = (training_config(config) or {}).get("deepspeed")
    root = config.parent
    if isinstance(ref, str) and ref:
        found, _ = resolve_reference(ref, config)
        if found is not None:
            base = found.resolve()
            for _ in Path(ref).parts:
                base = base.parent
            root = Path(os.path.commonpath([root.resolve(), base]))
            files.append(found.resolve())
    siblings = [p for p in config.parent.iterdir() if p.name not in SKIPPED_FOLDERS and p not in files]
    return root, files, siblings


def run(argv: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = cfgopt_main(argv)
    return code, out.getvalue()


def lint(names: list[str], options: list[str]) -> list[dict]:
    _, out = run(["lint", "--format", "json", "--exit-zero", *options, *names])
    return json.loads(out)["diagnostics"]


def copy_job(root: Path, files: list[Path], work: Path) -> None:
    """The files into `work`, in their layout under `root`, writable (a read-only corpus copies read-only)."""
    for f in files:
        dest = work / f.relative_to(root)
        dest.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if f.is_dir() else shutil.copy2)(f, dest)
    for copied in [work, *work.rglob("*")]:
        copied.chmod(copied.stat().st_mode | stat.S_IWUSR)


def check(config: Path, judged: str) -> list[dict]:
    """The leftovers of one config on one TARGET:GPUS, as dicts (config, judged, kind, code, severity, message)."""
    target, gpus = judged.split(":")
    options = ["--target", target, "--gpus", gpus]
    root, named, siblings = layout(config.resolve())
    cwd = Path.cwd()
    with tempfile.TemporaryDirectory(prefix="cfgopt-leftovers-") as tmp:
        copy_job(root, [*named, *siblings], Path(tmp))
        for rel, source in shared_files(config.resolve().parent).items():
            copy_job(source.parent, [source], Path(tmp) / config.resolve().parent.relative_to(root) / rel.parent)
        names = [str(f.relative_to(root)) for f in named]
        os.chdir(tmp)
        try:
            before = {(d["file"], d["code"]) for d in lint(names, options) if d["severity"] in LOUD}
            run(["fix", "--write", "--unsafe-fixes", "--exit-zero", *options, *names])
            after = [d for d in lint(names, options) if d["severity"] in LOUD]
        finally:
            os.chdir(cwd)
    out = []
    for d in after:
        kind = "caused" if (d["file"], d["code"]) not in before else "left" if watched(d["code"]) else None
        if kind:
            row = {"config": _shown(config), "judged": judged, "kind": kind, "code": d["code"]}
            out.append({**row, "severity": d["severity"], "message": d["message"]})
    return out


def _shown(path: Path) -> str:
    """The config's path as given, relative to this checkout where it is inside it."""
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def unique(found: list[Path]) -> list[Path]:
    """One config per identical (YAML, JSON) content."""
    seen: dict[str, Path] = {}
    for config in found:
        _, named, _ = layout(config.resolve())
        digest = hashlib.sha256(b"\0".join(f.read_bytes() for f in named)).hexdigest()
        seen.setdefault(digest, config)
    return list(seen.values())


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", type=Path, default=list(DEFAULT_FOLDERS))
    parser.add_argument("--judged", action="append", help="TARGET:GPUS (repeatable)")
    parser.add_argument("--out", type=Path, help="write every leftover as JSON here")
    args = parser.parse_args(argv)
    os.environ.setdefault("DISABLE_VERSION_CHECK", "1")
    found = unique(configs(args.paths))
    rows = [row for config in found for judged in args.judged or JUDGED for row in check(config, judged)]
    for row in rows:
        print(f"{row['kind']:6} {row['judged']:9} {row['code']:6} {row['config']}: {row['message'][:160]}")
    counts = Counter((row["kind"], row["code"]) for row in rows)
    print(f"{len(found)} training configs x {len(args.judged or JUDGED)} judged: {len(rows)} listed", end="")
    print("".join(f"; {kind} {code}: {n}" for (kind, code), n in sorted(counts.items())))
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1) + "\n")
    return 1 if rows else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
