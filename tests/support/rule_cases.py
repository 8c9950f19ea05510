"""The per-rule fixture cases in fixtures/rules/<CODE>/<case>/ and how to run them.

A case folder holds the input files, optionally `case.json` ({"args": [...cfgopt options...],
"all_rules": false}), the expected diagnostics in `expected.txt`, and, when the case has fixes, `fixed/`
with every input file as `cfgopt fix --write --unsafe-fixes` must leave it.

`expected.txt` has one block per diagnostic, in report order, blocks separated by a blank line:

    train.yaml:5:13 LF002 warning
      message: `bf16` is the string 'false', which LLaMA-Factory does not convert: ...
      fix (unsafe): Write the boolean `false`

(`fix: none` when there is no fix). Paths in messages are written relative to the case folder (`<case>/`)
or the current directory (`<cwd>/`), so the snapshot is the same on every machine.

A case that reads a large file kept once elsewhere in the repository (a dataset of fixtures/data/) names it in
`shared.txt`, one `DEST <- SOURCE` a line (DEST inside the case, SOURCE from the repository root, `#` comments):

    data/long.json <- fixtures/data/long/data/long.json

instead of carrying a copy. `job_folder(case)` and `working_copy` put it in place in a temporary folder; read a
case through them, never its folder as it lies.
`python scripts/update_rule_fixtures.py` rewrites expected.txt and fixed/ from the current behaviour;
review the diff before committing it.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from repo_paths import ROOT

from cfgopt.cli import main

CASES_DIR = ROOT / "fixtures" / "rules"
# A minimal LLaMA-Factory training config with no finding of its own, for tests that add the one line they test
TRAIN = """\
model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct
stage: sft
do_train: true
finetuning_type: lora
dataset: alpaca_en_demo
template: llama3
output_dir: out
bf16: true
"""
SHARED = "shared.txt"  # the files a case reads from elsewhere in the repository: `DEST <- SOURCE` a line
META_FILES = {"case.json", "expected.txt", SHARED}
NOT_COPIED = {"expected.txt", "fixed"}  # what a working copy of a case leaves behind


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


SUMMARY_HEADS = ("Checked ", "Would fix ", "Fixed ")  # the first line of a lint / fix run's summary


def summary_of(stderr: str) -> str:
    """A run's summary as one line: its first line and the indented parts below it (the hardware, the GPU count,
    the environment: cfgopt.lint.report.summary_lines), joined with "; "; "" when there is none."""
    lines = stderr.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(SUMMARY_HEADS)), None)
    if start is None:
        return ""
    parts = [lines[start]]
    for line in lines[start + 1 :]:
        if not line.startswith("  "):
            break
        parts.append(line[2:])
    return "; ".join(parts)


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """`cfgopt ARGV` in this process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def lint_diagnostics(options: list[str], *files: Path) -> list[dict]:
    """`cfgopt lint --format json --exit-zero OPTIONS FILES` in this process: its findings."""
    _, out, _ = run_cli(["lint", "--format", "json", "--exit-zero", *options, *map(str, files)])
    return json.loads(out)["diagnostics"]


def fix_output(options: list[str], *files: Path) -> str:
    """`cfgopt fix --write --unsafe-fixes --exit-zero OPTIONS FILES` in this process: what it printed."""
    _, out, err = run_cli(["fix", "--write", "--unsafe-fixes", "--exit-zero", *options, *map(str, files)])
    return out + err


# A bound on a hang, not a speed contract: a hang never ends, a loaded machine may be 10x slower than a quiet one
HANG_BOUND_S = 120


def cfgopt_process(
    *args: str,
    cwd: Path,
    env: dict[str, str] | None = None,
    stdin: bytes | None = None,
    text: bool = True,
    timeout: float = HANG_BOUND_S,
) -> subprocess.CompletedProcess:
    """`python -m cfgopt ARGS` of this checkout in a subprocess (a real process: its own stdin, signals, exit),
    `env` added to this one's. It fails the test when it prints a traceback, or never ends (`timeout`)."""
    run = subprocess.run(
        [sys.executable, "-m", "cfgopt", *args],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT), "DISABLE_VERSION_CHECK": "1", **(env or {})},
        capture_output=True,
        input=stdin,
        text=text,
        timeout=timeout,
    )
    stderr = run.stderr if text else run.stderr.decode(errors="replace")
    assert "Traceback" not in stderr, stderr
    return run


def _portable(text: str, folder: Path) -> str:
    """A message with the machine's absolute paths replaced by `<case>` and `<cwd>`."""
    for path, name in ((folder.resolve(), "<case>"), (Path.cwd().resolve(), "<cwd>")):
        text = text.replace(str(path), name)
    return text


def diagnostic_block(diag: dict, folder: Path) -> str:
    """One diagnostic of `cfgopt lint --format json` as it is written in expected.txt."""
    rel = Path(diag["file"]).resolve().relative_to(folder.resolve())
    fix = diag["fix"]
    fix_line = "fix: none" if fix is None else f"fix ({fix['applicability']}): {_portable(fix['description'], folder)}"
    message = _portable(diag["message"], folder).replace("\n", "\n    ")
    header = f"{rel}:{diag['line']}:{diag['column']} {diag['code']} {diag['severity']}"
    return f"{header}\n  message: {message}\n  {fix_line}"


def lint_blocks(folder: Path, args: list[str]) -> list[str]:
    """The case's diagnostics, one block each, in report order (file, position, code)."""
    files = [str(f) for f in input_files(folder)]
    _, out, _ = run_cli(["lint", "--format", "json", *files, *args])
    return [diagnostic_block(d, folder) for d in json.loads(out)["diagnostics"]]


def render_expected(blocks: list[str]) -> str:
    return "\n\n".join(blocks) + "\n" if blocks else ""


def parse_expected(text: str) -> list[str]:
    return [block.strip("\n") for block in text.split("\n\n") if block.strip()]


def shared_files(case: Path) -> dict[Path, Path]:
    """The files the case's shared.txt names: where each goes, relative to the case -> its one copy in the
    repository. ValueError on a line that is not `DEST <- SOURCE` or a DEST outside the case."""
    manifest = case / SHARED
    if not manifest.is_file():
        return {}
    out: dict[Path, Path] = {}
    for number, line in enumerate(manifest.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        dest, arrow, source = (part.strip() for part in line.partition(" <- "))
        if not (arrow and dest and source) or Path(dest).is_absolute() or ".." in Path(dest).parts:
            raise ValueError(f"{manifest}:{number}: expected `DEST <- SOURCE`, DEST inside the case: {line!r}")
        out[Path(dest)] = ROOT / source
    return out


def working_copy(case: Path, dest: Path) -> Path:
    """The case as a job in `dest` (made): its files and folders (data, a local model) and case.json, the files
    of its shared.txt put in place; expected.txt and fixed/ left behind."""

    def left_behind(folder: str, names: list[str]) -> set[str]:
        return NOT_COPIED & set(names) if Path(folder) == case else set()

    shutil.copytree(case, dest, ignore=left_behind, dirs_exist_ok=True)
    for rel, source in shared_files(case).items():
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, dest / rel)
    return dest


@contextlib.contextmanager
def job_folder(case: Path) -> Iterator[Path]:
    """Where to lint the case: its own folder, or, when it shares files, a working copy in a temporary folder
    (the case folder in the repository is never written)."""
    if not shared_files(case):
        yield case
        return
    with tempfile.TemporaryDirectory(prefix="cfgopt-case-") as tmp:
        yield working_copy(case, Path(tmp) / case.name)


def fix_in(folder: Path, args: list[str]) -> int:
    files = [str(f) for f in input_files(folder)]
    code, _, _ = run_cli(["fix", "--write", "--unsafe-fixes", *files, *args])
    return code
