"""The test suite stays in its tree: HOME, the XDG folders and every cache the real tools write (huggingface,
torch extensions, matplotlib, pip, ...) point into the session's own folder (tests/conftest.py), and no
DeepSpeed op is compiled (the oracle harness skips the shared-memory op DeepSpeed builds on a CPU)."""

from __future__ import annotations

import ast
import os
import pwd
import subprocess
import sys
from pathlib import Path

import pytest
from rule_cases import ROOT

REAL_HOME = Path(pwd.getpwuid(os.getuid()).pw_dir)

REDIRECTED = (
    "HOME",
    "XDG_CACHE_HOME",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "HF_HOME",
    "TORCH_EXTENSIONS_DIR",
    "TRITON_CACHE_DIR",
    "MPLCONFIGDIR",
    "PIP_CACHE_DIR",
    "PRE_COMMIT_HOME",
)


def test_home_and_caches_point_into_the_session_folder() -> None:
    session_home = Path(os.environ["HOME"])
    assert session_home != REAL_HOME and not REAL_HOME.is_relative_to(session_home)
    for name in REDIRECTED:
        assert Path(os.environ[name]).is_relative_to(session_home), name
    assert Path(os.path.expanduser("~/.cache/huggingface")).is_relative_to(session_home)


@pytest.mark.oracle
def test_an_oracle_run_writes_nothing_to_home_and_compiles_nothing(tmp_path: Path) -> None:
    """The oracle test that used to compile DeepSpeed's shared-memory op into ~/.cache/torch_extensions (a
    1-process torchrun launch with a DeepSpeed config), run in a pytest of its own whose HOME is an empty
    folder: that folder stays empty, and the session folder holds no compiled extension."""
    pytest.importorskip("llamafactory")
    pytest.importorskip("deepspeed")
    home, session = tmp_path / "home", tmp_path / "session"
    home.mkdir()
    redirected = {*REDIRECTED, "XDG_STATE_HOME", "TORCH_HOME", "TORCHINDUCTOR_CACHE_DIR", "HF_DATASETS_CACHE"}
    # and the process group the harness may have set up in this process: its port is taken
    launch = {"MASTER_ADDR", "MASTER_PORT", "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE"}
    env = {k: v for k, v in os.environ.items() if k not in redirected | launch}
    env.update(HOME=str(home), CFGOPT_TEST_HOME=str(session), PYTHONPATH=str(ROOT), DISABLE_VERSION_CHECK="1")
    test = "tests/oracle/test_oracle_seed.py::test_seed_fixed_launch_accepted_with_deepspeed_followed"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert list(home.iterdir()) == []
    assert not (session / ".cache" / "torch_extensions").exists(), "an op was compiled"


def test_no_tests_collected_stays_a_failure(tmp_path: Path) -> None:
    """pytest's exit 5 ("no tests collected": a wrong path, a selection that matches nothing) is not turned into
    a pass by anything the suite adds (conftest's hooks, the sampling): `set -e` in .ci/run fails on it."""
    layout = "tests/repository/test_layout.py"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", layout, "-k", "no_such_test"],
        cwd=ROOT,
        env={**os.environ, "CFGOPT_TEST_HOME": str(tmp_path / "session")},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 5, proc.stdout[-2000:]


# ------------------------------------------------------------------------------------- no wall-clock asserts
CLOCKS = {"perf_counter", "monotonic", "time", "perf_counter_ns", "monotonic_ns", "time_ns"}


def _reads_a_clock(node: ast.AST, clock_names: set[str]) -> bool:
    """`time.perf_counter()` (any clock of CLOCKS), or a name that was assigned from one in the same file."""
    for sub in ast.walk(node):
        call = sub.func if isinstance(sub, ast.Call) else None
        if isinstance(call, ast.Attribute) and call.attr in CLOCKS and ast.unparse(call.value) == "time":
            return True
        if isinstance(sub, ast.Name) and sub.id in clock_names:
            return True
    return False


def wall_clock_asserts(tree: ast.AST) -> list[int]:
    """Lines of the asserts that compare a time difference: a clock read minus something, or a name holding
    one. A wait loop's `while time.monotonic() < deadline` is no assert, and is allowed."""
    clock_names: set[str] = set()
    for node in ast.walk(tree):  # `elapsed = time.perf_counter() - start`: elapsed carries the clock
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.BinOp) and _reads_a_clock(node.value, set()):
            clock_names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert):
            diffs = [s for s in ast.walk(node.test) if isinstance(s, ast.BinOp) and isinstance(s.op, ast.Sub)]
            if any(_reads_a_clock(d, set()) for d in diffs) or _reads_a_clock(node.test, clock_names):
                lines.append(node.lineno)
    return lines


def test_no_test_asserts_wall_clock_time() -> None:
    """A loaded CI machine is 5-10x slower: tests assert work done (tests/support/work_counter.py) and behaviour;
    speed targets live in bench/ with the command that measured them."""
    found = {
        str(path.relative_to(ROOT)): lines
        for path in sorted((ROOT / "tests").rglob("*.py"))
        if (lines := wall_clock_asserts(ast.parse(path.read_text(), str(path))))
    }
    assert found == {}, f"tests that time themselves (file: lines): {found}"


def test_the_wall_clock_guard_sees_each_shape() -> None:
    """The shapes the guard must catch, and a wait loop it must let be, kept as data (tests/data/clock_shapes/):
    written inline they would read as the very asserts a scan of the tests looks for."""
    shapes = ROOT / "tests" / "data" / "clock_shapes"
    found = {path.stem: wall_clock_asserts(ast.parse(path.read_text())) for path in shapes.glob("*.py.txt")}
    assert found == {"timed.py": [3], "held.py": [4], "waits.py": []}


# Folders of tests/ that name no package of cfgopt/: tests across packages, and what the tests share.
ACROSS_PACKAGES = {
    "adversarial": "the never-hang / never-damage / hostile-input reproducers and the fuzz runs",
    "oracle": "cfgopt's verdicts against the real tools on whole configs",
    "repository": "the house itself: floors, layout, docs, README figures, this suite",
}
SHARED = {"support": "the helpers the test modules import", "data": "the data the tests read"}


def test_the_tests_mirror_the_package() -> None:
    """To change cfgopt/<package>/ you read tests/<package>/: every test module sits one folder down, in a folder
    named after a package of cfgopt/ or in one of ACROSS_PACKAGES; the module names stay unique (pytest imports
    each by its bare name)."""
    packages = {p.name for p in (ROOT / "cfgopt").iterdir() if (p / "__init__.py").is_file()}
    tests = ROOT / "tests"
    modules = [p.relative_to(tests) for p in tests.rglob("test_*.py") if not p.is_relative_to(tests / "data")]
    misplaced = [str(m) for m in modules if len(m.parts) != 2 or m.parts[0] not in packages | ACROSS_PACKAGES.keys()]
    assert misplaced == []
    folders = {p.name for p in tests.iterdir() if p.is_dir() and not p.name.startswith((".", "__"))}
    assert folders <= packages | ACROSS_PACKAGES.keys() | SHARED.keys()
    assert packages - folders == set(), "a package of cfgopt/ without its folder of tests"
    names = [m.name for m in modules]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)


def test_a_test_module_imports_no_test_module_of_another_folder() -> None:
    """pytest puts a test module's own folder on the path when it imports it, nothing else: what tests of another
    folder share belongs in tests/support/."""
    tests = ROOT / "tests"
    crossing = []
    for path in tests.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                if top.startswith("test_") and not (path.parent / f"{top}.py").is_file():
                    crossing.append(f"{path.relative_to(tests)}: {name}")
    assert crossing == []
