"""The code base's shape, checked: no import cycles among cfgopt's modules, and short functions.

Both are read from the source (AST), so an import inside a function or under `if TYPE_CHECKING:` counts
as much as one at the top: a lazy import that dodges a cycle is still a cycle (one layer knowing another
that knows it back).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from repo_paths import ROOT

PACKAGE = ROOT / "cfgopt"
MAX_FUNCTION_LINES = 80


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imported(module: str, path: Path, node: ast.Import | ast.ImportFrom, known: dict[str, Path]) -> set[str]:
    """The cfgopt modules an import statement loads (the deepest known module of each dotted name)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:  # relative: from the module's package
            package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
            package = package[: len(package) - (node.level - 1)]
            base = ".".join([*package, base] if base else package)
        # `from pkg import mod` loads pkg.mod; `from mod import name` loads mod
        names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
    out: set[str] = set()
    for name in names:
        while name and name not in known:
            name = name.rpartition(".")[0]
        if name and name != module:
            out.add(name)
    return out


def import_graph() -> dict[str, set[str]]:
    known = _modules()
    graph: dict[str, set[str]] = {}
    for module, path in known.items():
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                deps |= _imported(module, path, node, known)
        graph[module] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles() -> None:
    graph = import_graph()
    found = cycles(graph)
    detail = "; ".join(
        " <-> ".join(c) + " (" + ", ".join(f"{a} -> {b}" for a in c for b in sorted(graph[a] & set(c))) + ")"
        for c in found
    )
    assert not found, f"import cycles: {detail}"


def test_cycle_finder_sees_lazy_imports() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    tree = ast.parse("def f():\n    from cfgopt.lint import engine\n")
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom))
    assert _imported("cfgopt.rules.suppressions", PACKAGE / "suppressions.py", node, _modules()) == {
        "cfgopt.lint.engine"
    }


def long_functions() -> dict[str, int]:
    out: dict[str, int] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                assert node.end_lineno is not None
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    out[f"{path.relative_to(PACKAGE.parent).as_posix()}:{node.name}"] = lines
    return out


def test_no_long_functions() -> None:
    found = long_functions()
    assert not found, f"functions over {MAX_FUNCTION_LINES} lines (split them into named steps): {found}"


def test_no_rule_imports_another_rule() -> None:
    """What rules share lives in cfgopt/rules/support/: a rule importing a rule loads it on every run that
    needs the first, and the lazy loading by file kind (tests/lint/test_startup.py) no longer holds."""
    graph = import_graph()
    rule_module = re.compile(r"^cfgopt\.rules\.[a-z]+\d{3}_\w+$")
    found = {m: sorted(d for d in deps if rule_module.match(d)) for m, deps in graph.items() if rule_module.match(m)}
    assert not {m: d for m, d in found.items() if d}
