"""cfgopt imports no `typing` at run time (its import is 3 ms of a seed lint's start-up, bench/results.md), and its
records are `Record`s (cfgopt/text/record.py), never `typing.NamedTuple` classes (135 us each to create).

The source is checked (AST): `NamedTuple` appears nowhere but in cfgopt/text/record.py, and every import of
`typing` sits under `if TYPE_CHECKING:` with `TYPE_CHECKING = False` set by the module itself (importing the
name from `typing` would import `typing`). A seed lint, a lint with a target and a `fix --diff` are run in a
subprocess and must leave `typing` out of `sys.modules` (the work, not the time, is asserted)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from repo_paths import ROOT

RECORD_MODULE = Path("cfgopt/text/record.py")


def _guarded(tree: ast.Module) -> set[int]:
    """The ids of the nodes under a module-level `if TYPE_CHECKING:` (its body, not an `else:`)."""
    inside: set[int] = set()
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            inside |= {id(n) for statement in node.body for n in ast.walk(statement)}
    return inside


def _sets_its_own_flag(tree: ast.Module) -> bool:
    """`TYPE_CHECKING = False` at module level."""
    return any(
        isinstance(node, ast.Assign)
        and [getattr(t, "id", None) for t in node.targets] == ["TYPE_CHECKING"]
        and isinstance(node.value, ast.Constant)
        and node.value.value is False
        for node in tree.body
    )


def typing_problems(source: str, is_record_module: bool = False) -> list[str]:
    """What the convention refuses in one module's source: `line: what`."""
    tree = ast.parse(source)
    guarded = _guarded(tree)
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            modules = [node.module or ""]
        else:
            modules = []
        if any(m.split(".")[0] in ("typing", "typing_extensions") for m in modules) and id(node) not in guarded:
            problems.append(f"{node.lineno}: typing imported at run time (put it under `if TYPE_CHECKING:`)")
        names = [a.name for a in node.names] if isinstance(node, (ast.Import, ast.ImportFrom)) else []
        if not is_record_module and ("NamedTuple" in names or (isinstance(node, ast.Name) and node.id == "NamedTuple")):
            problems.append(f"{node.lineno}: NamedTuple (write `class X(Record)`, cfgopt/text/record.py)")
    if guarded and not _sets_its_own_flag(tree):
        problems.append("TYPE_CHECKING used without `TYPE_CHECKING = False` in the module")
    return sorted(set(problems))


def test_no_module_imports_typing_at_run_time_nor_defines_a_named_tuple() -> None:
    found = {}
    for path in sorted((ROOT / "cfgopt").rglob("*.py")):
        relative = path.relative_to(ROOT)
        if problems := typing_problems(path.read_text(encoding="utf-8"), relative == RECORD_MODULE):
            found[str(relative)] = problems
    assert found == {}


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from typing import Any\n", ["1: typing imported at run time (put it under `if TYPE_CHECKING:`)"]),
        ("import typing\n", ["1: typing imported at run time (put it under `if TYPE_CHECKING:`)"]),
        (
            "def f():\n    from typing import cast\n",
            ["2: typing imported at run time (put it under `if TYPE_CHECKING:`)"],
        ),
        (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from typing import Any\n",
            [
                "1: typing imported at run time (put it under `if TYPE_CHECKING:`)",
                "TYPE_CHECKING used without `TYPE_CHECKING = False` in the module",
            ],
        ),
        (
            "TYPE_CHECKING = False\nif TYPE_CHECKING:\n    pass\nelse:\n    from typing import Any\n",
            ["5: typing imported at run time (put it under `if TYPE_CHECKING:`)"],
        ),
        (
            "import collections\nclass P(collections.NamedTuple):\n    pass\n",
            [],  # not the name NamedTuple: an attribute (collections has no such class either)
        ),
        (
            "TYPE_CHECKING = False\nif TYPE_CHECKING:\n    from typing import NamedTuple\n"
            "class P(NamedTuple):\n    x: int\n",
            [
                "3: NamedTuple (write `class X(Record)`, cfgopt/text/record.py)",
                "4: NamedTuple (write `class X(Record)`, cfgopt/text/record.py)",
            ],
        ),
        ("TYPE_CHECKING = False\nif TYPE_CHECKING:\n    from typing import Any\nx: Any = 1\n", []),
    ],
)
def test_the_scan_sees_each_shape(source: str, expected: list[str]) -> None:
    assert typing_problems(source) == expected


LINT_THEN_LIST = (
    "import sys; before = 'typing' in sys.modules; from cfgopt.cli import main; main(sys.argv[1:]); "
    "print(before, 'typing' in sys.modules, 'cfgopt.lint.engine' in sys.modules)"
)


@pytest.mark.parametrize(
    "argv",
    [
        ["lint", "fixtures/seed/llama3_lora_sft.yaml"],
        ["lint", "fixtures/seed/llama3_lora_sft.yaml", "--target", "mi300x", "--gpus", "8"],
        ["fix", "--diff", "fixtures/seed/llama3_lora_sft.yaml"],
    ],
)
def test_a_seed_lint_imports_no_typing(argv: list[str]) -> None:
    run = subprocess.run(
        [sys.executable, "-c", LINT_THEN_LIST, *argv], cwd=ROOT, capture_output=True, text=True, check=False
    )
    before, after, ran = run.stdout.strip().splitlines()[-1].split()
    if before == "True":
        pytest.skip("this interpreter's start-up imports typing (a .pth file or sitecustomize): nothing to judge")
    assert (after, ran) == ("False", "True"), run.stderr[-2000:]
