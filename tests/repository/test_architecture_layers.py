"""The floors of the house, checked: every module of `cfgopt/` stands on the floor that docs/architecture.md
("Floors") gives its folder, and imports only from its own floor and the floors below it.

Read from the source (AST): an import inside a function or under `if TYPE_CHECKING:` counts as much as one at
the top (a lazy import that climbs still makes the lower floor know the higher one). What may climb is listed
in `CLIMBS`, at most three, each with why; an entry that no longer climbs fails too, so the list stays true.
Also: no cycle between the packages of `cfgopt/` (a module-level cycle is `tests/repository/test_layout.py`'s),
and at most 12 modules directly in `cfgopt/`.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from repo_paths import ROOT

PACKAGE = ROOT / "cfgopt"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
MAX_TOP_LEVEL_MODULES = 12
MAX_CLIMBS = 3

# (importing module, imported module) -> why it climbs. At most MAX_CLIMBS, each with its reason.
CLIMBS: dict[tuple[str, str], str] = {}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def floors() -> list[list[str]]:
    """The floors, lowest first, as docs/architecture.md's "Floors" table lists them: each a list of module
    prefixes (`cfgopt.text` for `cfgopt/text/`, `cfgopt.cli` for `cfgopt/cli.py`). Rows with the same number
    are one floor."""
    section = ARCHITECTURE.read_text(encoding="utf-8").split("\n## Floors\n", 1)[1].split("\n## ", 1)[0]
    by_number: dict[int, list[str]] = {}
    for number, places in re.findall(r"^\|\s*(\d+)\s*\|([^|]*)\|", section, re.MULTILINE):
        for place in re.findall(r"`(cfgopt/[^`]*)`", places):
            name = place.rstrip("/").removesuffix(".py").removesuffix("/__init__").replace("/", ".")
            by_number.setdefault(int(number), []).append(name)
    return [by_number[n] for n in sorted(by_number)]


def floor_of(module: str, layout: list[list[str]]) -> int:
    """The floor of a module: the one naming its longest prefix."""
    best, length = -1, -1
    for i, prefixes in enumerate(layout):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > length:
                best, length = i, len(prefix)
    return best


def imports(module: str, path: Path, known: dict[str, Path]) -> list[tuple[str, int]]:
    """The cfgopt modules a module imports, each with the line of the import (every import in the file)."""
    out: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            base = node.module or ""
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            assert not isinstance(node, ast.ImportFrom), f"{path}:{node.lineno}: a relative import"
            continue
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != module:
                out.append((name, node.lineno))
    return out


def climbs() -> list[tuple[str, str, int]]:
    """Every import from a lower floor to a higher one: (importer, imported, line)."""
    known, layout = modules(), floors()
    found = []
    for module, path in known.items():
        for imported, line in imports(module, path, known):
            if floor_of(imported, layout) > floor_of(module, layout):
                found.append((module, imported, line))
    return found


def _package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def package_cycles() -> list[list[str]]:
    """Packages of cfgopt/ (and its top-level modules) that import each other, directly or round a loop."""
    known = modules()
    graph: dict[str, set[str]] = {}
    for module, path in known.items():
        for imported, _ in imports(module, path, known):
            if _package(imported) != _package(module):
                graph.setdefault(_package(module), set()).add(_package(imported))

    def reach(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for nxt in graph.get(todo.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    loops = {tuple(sorted({p} | {q for q in reach(p) if p in reach(q)})) for p in graph if p in reach(p)}
    return sorted(list(loop) for loop in loops)


def test_every_module_stands_on_a_floor() -> None:
    layout = floors()
    assert len(layout) >= 5, "docs/architecture.md has no Floors table (## Floors, rows `| N | `cfgopt/...` |`)"
    lost = [m for m in modules() if floor_of(m, layout) < 0]
    assert not lost, f"modules on no floor: add their folder to docs/architecture.md's Floors table: {lost}"


def test_no_import_climbs_to_a_higher_floor() -> None:
    assert len(CLIMBS) <= MAX_CLIMBS and all(CLIMBS.values()), "at most three climbs, each with its reason"
    names = {i: ", ".join(p) for i, p in enumerate(floors())}
    layout = floors()
    found = climbs()
    unexplained = [
        f"cfgopt/{m.removeprefix('cfgopt.').replace('.', '/')}.py:{line} imports {i} "
        f"(floor {names[floor_of(m, layout)]} -> {names[floor_of(i, layout)]})"
        for m, i, line in found
        if (m, i) not in CLIMBS
    ]
    assert not unexplained, "imports that climb: move the definition down, pass it in, or move the module:\n" + (
        "\n".join(unexplained)
    )
    stale = set(CLIMBS) - {(m, i) for m, i, _ in found}
    assert not stale, f"CLIMBS lists imports that no longer climb: remove them: {sorted(stale)}"


def test_no_cycle_between_packages() -> None:
    assert not package_cycles(), f"packages that import each other: {package_cycles()}"


# What reads a file a user, a config or the machine names (`cfgopt/text/user_files.py`): knowledge/ holds facts and
# the tools' snapshots, never such a read (a model's config.json is read by cfgopt/loaders/model_config.py).
USER_FILE_READER = "cfgopt.text.user_files"


def test_knowledge_reads_no_user_file() -> None:
    known = modules()
    reading = [
        f"{path.relative_to(ROOT)}:{line}"
        for module, path in known.items()
        if module.startswith("cfgopt.knowledge.")
        for imported, line in imports(module, path, known)
        if imported == USER_FILE_READER
    ]
    assert not reading, f"knowledge/ holds pure facts: read the file on the floor that loads it: {reading}"


def test_few_modules_directly_in_the_package() -> None:
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL_MODULES, f"{len(top)} modules directly in cfgopt/: {top}"


def test_the_checks_see_lazy_and_type_checking_imports(tmp_path: Path) -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from cfgopt.lint.engine import LintProject\n"
        "def f():\n    from cfgopt.plan import planner\n"
    )
    path = tmp_path / "m.py"
    path.write_text(source)
    known = {"cfgopt": PACKAGE, "cfgopt.lint.engine": path, "cfgopt.plan": path, "cfgopt.plan.planner": path}
    assert sorted(imports("cfgopt.text.m", path, known)) == [("cfgopt.lint.engine", 3), ("cfgopt.plan.planner", 5)]
    layout = [["cfgopt.text"], ["cfgopt.plan"], ["cfgopt.lint"]]
    assert [floor_of(m, layout) for m in ("cfgopt.text.m", "cfgopt.plan.planner", "cfgopt.lint.engine")] == [0, 1, 2]
