#!/usr/bin/env python
"""List every start-up check of the supported releases and keep the table that maps each to a rule.

Why this exists: a rule catalog written from issue threads misses the checks nobody has hit yet. This script reads
the source (AST only, nothing is imported) of LLaMA-Factory's argument classes and the loaders a training run
reaches before its first step, and of DeepSpeed's config modules, and lists every `raise` and every `assert` there,
each with its file, enclosing function, condition and message. The committed table
(`tests/data/startup-audit.json`) maps each check, keyed by its file and message text (stable across line drift),
to the rule that reports it or to the reason it cannot be checked statically; `tests/rules/test_startup_audit.py` fails
on a check that is not mapped.

Usage::

    python scripts/audit_startup_checks.py                 # the installed llamafactory and deepspeed
    python scripts/audit_startup_checks.py \\
        --source llamafactory=0.9.0=downloads/llamafactory-0.9.0-py3-none-any.whl \\
        --source deepspeed=0.14.5=downloads/deepspeed-0.14.5.tar.gz ...   # wheels, sdists or unpacked folders
    python scripts/audit_startup_checks.py --check          # exit 1 when a listed check is not mapped

Every run merges what it finds into the table (releases added to an entry's list; a new check added unmapped,
`rule` and `reason` empty), keeping the mappings already written. Sources: `pip download --no-deps
llamafactory==0.9.0` (wheels) and `pip download --no-deps --no-binary deepspeed deepspeed==0.14.5` (sdists).
"""

from __future__ import annotations

import argparse
import ast
import fnmatch
import importlib.util
import json
import pathlib
import re
import sys
import tarfile
import zipfile
from collections.abc import Iterator

ROOT = pathlib.Path(__file__).resolve().parent.parent
TABLE = ROOT / "tests" / "data" / "startup-audit.json"
DOC = ROOT / "docs" / "startup-audit.md"
# What a reason's category says about a check that no rule reports (docs/startup-audit.md).
CATEGORIES = {
    "data": "depends on the dataset files or dataset_info.json, which cfgopt does not read",
    "model": "depends on the model's weights, architecture class or checkpoint, known once it is loaded",
    "runtime": "depends on the machine, the installed packages, the launch or files present at launch",
    "export": "reached only by export / inference commands, not by `llamafactory-cli train`",
    "internal": "a programming check that no config value reaches",
    "legacy": "a DeepSpeed block LLaMA-Factory's HF path never builds, or one DeepSpeed 0.19 removed (DS004 there)",
    "todo": "checkable from the config, no rule yet (rare in real configs); the backlog below",
}

# Package-relative globs of the modules a training run reads before its first step.
SCANNED: dict[str, tuple[str, ...]] = {
    "llamafactory": (
        "hparams/*.py",
        "model/loader.py",
        "model/adapter.py",
        "model/patcher.py",
        "model/model_utils/*.py",
        "data/loader.py",
        "data/parser.py",
        "data/template.py",
        "train/tuner.py",
    ),
    "deepspeed": (
        "runtime/config.py",
        "runtime/config_utils.py",
        "runtime/precision_config.py",
        "runtime/zero/config.py",
        "runtime/zero/offload_config.py",
        "runtime/zero/leaf_module_config.py",
        "runtime/activation_checkpointing/config.py",
        "runtime/data_pipeline/config.py",
        "runtime/model_checkpointing/config.py",
        "runtime/tensor_parallel/config.py",
        "runtime/swap_tensor/aio_config.py",
        "monitor/config.py",
        "comm/config.py",
        "compile/config.py",
        "profiling/config.py",
        "autotuning/config.py",
        "elasticity/config.py",
        "nebula/config.py",
        "datastates/config.py",
    ),
}
# Functions outside the config modules that judge a config value when the engine starts: the optimizer and
# scheduler blocks (the builders, and the constructors of DeepSpeed's schedulers), and ZeRO-3's NVMe parameter
# offload, which `zero.Init` sets up while the model loads (the remote device, a swap buffer per parameter).
EXTRA_FUNCTIONS: dict[str, dict[str, tuple[str, ...]]] = {
    "deepspeed": {
        "runtime/engine.py": ("_configure_basic_optimizer", "_scheduler_from_config"),
        "runtime/lr_schedules.py": ("__init__", "_initialize_cycle", "_format_param"),
        "runtime/zero/partition_parameters.py": ("_validate_remote_device",),
        "runtime/swap_tensor/partitioned_param_swapper.py": ("get_buffer",),
    },
}


def release_files(package: str, location: str, patterns: tuple[str, ...] = ()) -> dict[str, str]:
    """The scanned modules of one release (or those `patterns` name), package-relative path -> source text, from a
    wheel, an sdist or a folder."""
    texts: dict[str, str] = {}
    path = pathlib.Path(location)
    patterns = patterns or SCANNED[package] + tuple(EXTRA_FUNCTIONS.get(package, {}))

    def wanted(relative: str) -> bool:
        folder, _, name = relative.rpartition("/")
        return any(
            folder == pattern.rpartition("/")[0] and fnmatch.fnmatchcase(name, pattern.rpartition("/")[2])
            for pattern in patterns
        )

    marker = f"{package}/"
    if path.is_dir():
        for file in path.rglob("*.py"):
            relative = file.relative_to(path).as_posix()
            relative = relative.split(marker, 1)[1] if marker in relative else relative
            if wanted(relative):
                texts[relative] = file.read_text(encoding="utf-8")
        return texts
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            for name in archive.namelist():
                relative = name.split(marker, 1)[1] if marker in name else ""
                if relative and wanted(relative) and name.count(marker) == 1:
                    texts[relative] = archive.read(name).decode("utf-8")
        return texts
    with tarfile.open(path) as archive:
        for member in archive.getmembers():
            parts = member.name.split("/")
            # sdist layout: <name>-<version>/<package>/... (LLaMA-Factory's: .../src/llamafactory/...)
            if package not in parts[1:3] or not member.isfile():
                continue
            relative = "/".join(parts[parts.index(package, 1) + 1 :])
            if wanted(relative):
                handle = archive.extractfile(member)
                if handle is not None:
                    texts[relative] = handle.read().decode("utf-8")
    return texts


def _text(node: ast.AST | None) -> str:
    """A message as its literal parts: f-string fields and `.format` arguments become `{}`."""
    if node is None:
        return ""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(_text(value) if isinstance(value, ast.Constant) else "{}" for value in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _text(node.left) + _text(node.right)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        return re.sub(r"%[sdrf]", "{}", _text(node.left))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
        return re.sub(r"\{[^{}]*\}", "{}", _text(node.func.value))
    if isinstance(node, ast.Call) and node.args:
        return _text(node.args[0])
    return "<" + ast.unparse(node) + ">"


def _normal(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


class Check:
    """One `raise` or `assert` in a release's source."""

    def __init__(self, file: str, function: str, kind: str, condition: str, message: str, line: int) -> None:
        self.file, self.function, self.kind = file, function, kind
        self.condition, self.message, self.line = condition, message, line

    @property
    def key(self) -> tuple[str, str]:
        return (self.file, self.message)


def _raise_message(node: ast.Raise) -> tuple[str, str]:
    exc = node.exc
    if exc is None:
        return "re-raise", "<re-raise>"
    name = ast.unparse(exc.func if isinstance(exc, ast.Call) else exc)
    if isinstance(exc, ast.Call):
        return name, _normal(_text(exc.args[0]) if exc.args else f"<{name}>")
    return name, f"<{name}>"


def checks_in(file: str, text: str) -> Iterator[Check]:
    """Every raise/assert of one module with its enclosing function and the `if` that guards it."""
    tree = ast.parse(text)

    def walk(node: ast.AST, function: str, conditions: tuple[str, ...]) -> Iterator[Check]:
        for field, value in ast.iter_fields(node):
            children = value if isinstance(value, list) else [value]
            for child in children:
                if not isinstance(child, ast.AST):
                    continue
                inner, guard = function, conditions
                if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    inner = f"{function}.{child.name}" if function else child.name
                if isinstance(node, ast.If) and field in ("body", "orelse"):
                    test = _normal(ast.unparse(node.test))
                    guard = (*conditions, test if field == "body" else f"not ({test})")
                if isinstance(child, ast.Raise):
                    kind, message = _raise_message(child)
                    yield Check(file, inner, kind, " and ".join(guard[-2:]), message, child.lineno)
                elif isinstance(child, ast.Assert):
                    message = _normal(_text(child.msg)) if child.msg else "assert " + _normal(ast.unparse(child.test))
                    yield Check(file, inner, "assert", _normal(ast.unparse(child.test)), message, child.lineno)
                yield from walk(child, inner, guard)

    yield from walk(tree, "", ())


def scan(package: str, location: str) -> list[Check]:
    found: list[Check] = []
    for relative, text in sorted(release_files(package, location).items()):
        only = EXTRA_FUNCTIONS.get(package, {}).get(relative, ())
        found.extend(
            check
            for check in checks_in(relative, text)
            if check.kind != "re-raise" and (not only or check.function.rsplit(".", 1)[-1] in only)
        )
    return found


def installed(package: str) -> tuple[str, str] | None:
    """(version, folder) of an installed package, found without importing it."""
    from importlib import metadata

    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return metadata.version(package), next(iter(spec.submodule_search_locations))


def merge(table: list[dict], package: str, version: str, checks: list[Check]) -> int:
    """Add one release's checks to the table; returns how many new entries were added."""
    by_key = {(entry["package"], entry["file"], entry["message"]): entry for entry in table}
    added = 0
    for check in checks:
        entry = by_key.get((package, *check.key))
        if entry is None:
            entry = {
                "package": package,
                "file": check.file,
                "message": check.message,
                "function": check.function,
                "condition": check.condition[:120],
                "releases": [],
                "rule": "",
                "reason": "",
            }
            by_key[(package, *check.key)] = entry
            table.append(entry)
            added += 1
        if version not in entry["releases"]:
            entry["releases"] = sorted({*entry["releases"], version}, key=_version_key)
    table.sort(key=lambda entry: (entry["package"], entry["file"], entry["message"]))
    return added


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version)[:3])


def write_table(table: list[dict]) -> None:
    """One check per line: a release's new checks show as added lines in a diff."""
    lines = [json.dumps(entry, ensure_ascii=False) for entry in table]
    TABLE.write_text("[\n" + ",\n".join(lines) + "\n]\n", encoding="utf-8")


def render_doc(table: list[dict]) -> str:
    """docs/startup-audit.md: what the table holds, by rule and by reason, and the backlog of `todo` checks."""
    releases = {
        package: sorted({v for e in table if e["package"] == package for v in e["releases"]}, key=_version_key)
        for package in SCANNED
    }
    by_rule: dict[str, int] = {}
    by_category: dict[str, int] = {}
    for entry in table:
        if entry["rule"]:
            for code in entry["rule"].split():
                by_rule[code] = by_rule.get(code, 0) + 1
        else:
            category = entry["reason"].split(":")[0]
            by_category[category] = by_category.get(category, 0) + 1
    lines = [
        "# Start-up audit",
        "",
        "<!-- Generated by `python scripts/audit_startup_checks.py` from tests/data/startup-audit.json: "
        "do not edit. -->",
        "",
        "Every `raise` and `assert` that can stop a training run before its first step, in the source of "
        "LLaMA-Factory's argument classes and the loaders `llamafactory-cli train` reaches (hparams/, model/, "
        "data/, train/tuner.py) and of DeepSpeed's config modules (plus the engine's optimizer and scheduler "
        "builders), read as AST from each supported release:",
        "",
    ]
    lines += [f"- {package}: {', '.join(versions)}" for package, versions in releases.items()]
    lines += [
        "",
        f"{len(table)} distinct checks (keyed by file and message, so line drift between releases keeps the key). "
        f"{sum(1 for e in table if e['rule'])} are reported by a rule; the others carry the reason no rule can "
        "report them. tests/rules/test_startup_audit.py fails on a check without either, and on a check of the "
        "installed releases the table lacks. After a new release: run the script with its sources "
        "(`--source PACKAGE=VERSION=PATH`, a wheel, an sdist or a folder) and map what it adds.",
        "",
        "| rule | checks |",
        "| --- | --- |",
    ]
    lines += [f"| {code} | {count} |" for code, count in sorted(by_rule.items())]
    lines += ["", "| reason | checks | meaning |", "| --- | --- | --- |"]
    lines += [f"| {name} | {by_category.get(name, 0)} | {text} |" for name, text in CATEGORIES.items()]
    lines += [
        "",
        "## Backlog (`todo`)",
        "",
        "| package | file | message | releases | note |",
        "| --- | --- | --- | --- | --- |",
    ]
    for entry in table:
        if entry["reason"].startswith("todo"):
            span = f"{entry['releases'][0]}-{entry['releases'][-1]}"
            message = entry["message"].replace("|", "\\|")
            note = entry["reason"].removeprefix("todo:").strip().replace("|", "\\|")
            lines.append(f"| {entry['package']} | {entry['file']} | {message} | {span} | {note} |")
    return "\n".join(lines) + "\n"


def unmapped(table: list[dict]) -> list[dict]:
    return [entry for entry in table if not entry.get("rule") and not entry.get("reason")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument(
        "--source",
        action="append",
        default=[],
        metavar="PACKAGE=VERSION=PATH",
        help="a release's wheel, sdist or folder (repeatable); default: the installed llamafactory and deepspeed",
    )
    parser.add_argument("--check", action="store_true", help="exit 1 when a check is not mapped; write nothing")
    args = parser.parse_args(argv)
    releases: list[tuple[str, str, str]] = []
    for source in args.source:
        package, version, location = source.split("=", 2)
        releases.append((package, version, location))
    if not args.source:
        for package in SCANNED:
            found = installed(package)
            if found is not None:
                releases.append((package, *found))
    table = json.loads(TABLE.read_text(encoding="utf-8")) if TABLE.exists() else []
    for package, version, location in releases:
        checks = scan(package, location)
        added = merge(table, package, version, checks)
        print(f"{package} {version}: {len(checks)} checks, {added} new in the table")
    missing = unmapped(table)
    for entry in missing:
        print(f"unmapped: {entry['package']} {entry['file']} ({entry['function']}): {entry['message']}")
    if args.check:
        return 1 if missing else 0
    write_table(table)
    DOC.write_text(render_doc(table), encoding="utf-8")
    print(f"{len(table)} entries, {len(missing)} unmapped -> {TABLE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
