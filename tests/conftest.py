"""What every test run shares: its own home and caches, the sampled or the full set, and the oracle guard.

**Nothing outside the tree and the temporary folder.** The real tools the oracle tests run write caches into
the user's home (huggingface, matplotlib, torch extensions, pip, triton, ...). At import time, before any
test module imports them, HOME, the XDG folders and every cache variable point into one temporary folder for
the session (set in os.environ, so the subprocesses the tests start inherit them too); it is removed at the
end. CFGOPT_TEST_HOME names that folder instead (kept: tests/repository/test_suite_hygiene.py looks into it).

**Sampled by default, everything with --full.** The slow parametrised tests (the differential oracle's
examples, the corpus files, the trigger check's fixtures, the version pairs) run a fixed, deterministic
subset by default (`sampling.sample`, `sampling.params`), and a test marked `slow` is skipped; `--full` or
CFGOPT_FULL_TESTS=1 runs all of them (.ci/run runs the default set; a CI run with time to spare sets
CFGOPT_FULL_TESTS=1). Each sampled test says so in its docstring and CONTRIBUTING.md lists them.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

# tests/support/ holds the shared helpers (rule_cases.py, oracle_harness.py, sampling.py, repo_paths.py, ...)
# the test modules in tests/<package>/ import by name.
sys.path.insert(0, str(Path(__file__).resolve().parent / "support"))

REAL_HOME = Path.home()


def _session_home() -> tuple[Path, bool]:
    """The session's home folder, and whether this run created it (and so removes it at the end)."""
    given = os.environ.get("CFGOPT_TEST_HOME")
    if given:
        Path(given).mkdir(parents=True, exist_ok=True)
        return Path(given), False
    return Path(tempfile.mkdtemp(prefix="cfgopt-tests-home-")), True


def _pip_config() -> str | None:
    """A pip configuration in the real home (an index mirror on a CI machine) still applies with HOME moved."""
    for candidate in (REAL_HOME / ".config" / "pip" / "pip.conf", REAL_HOME / ".pip" / "pip.conf"):
        if candidate.is_file():
            return str(candidate)
    return None


def _redirect_home(home: Path) -> None:
    cache = home / ".cache"
    pip_config = os.environ.get("PIP_CONFIG_FILE") or _pip_config()
    os.environ.update(
        HOME=str(home),
        XDG_CACHE_HOME=str(cache),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_DATA_HOME=str(home / ".local" / "share"),
        XDG_STATE_HOME=str(home / ".local" / "state"),
        HF_HOME=str(cache / "huggingface"),
        TORCH_HOME=str(cache / "torch"),
        TORCH_EXTENSIONS_DIR=str(cache / "torch_extensions"),
        TORCHINDUCTOR_CACHE_DIR=str(cache / "torchinductor"),
        TRITON_CACHE_DIR=str(cache / "triton"),
        MPLCONFIGDIR=str(cache / "matplotlib"),
        PIP_CACHE_DIR=str(cache / "pip"),
        PRE_COMMIT_HOME=str(cache / "pre-commit"),
        NUMBA_CACHE_DIR=str(cache / "numba"),
        HYPOTHESIS_STORAGE_DIRECTORY=str(cache / "hypothesis"),  # not .hypothesis/ in the checkout
        CUDA_CACHE_PATH=str(cache / "nv"),
        # DeepSpeed's install-time switch: nothing a test installs compiles an op. At run time DeepSpeed
        # compiles one (into TORCH_EXTENSIONS_DIR) when it sets up a process group on a CPU; the oracle
        # harness stops that (oracle_harness._lf), tests/repository/test_suite_hygiene.py checks it
        DS_BUILD_OPS="0",
    )
    if pip_config:
        os.environ["PIP_CONFIG_FILE"] = pip_config


SESSION_HOME, _CREATED = _session_home()
_redirect_home(SESSION_HOME)


def _seeded_hypothesis() -> None:
    """Every property test draws the same examples in every run and order: derandomized (the seed is the test's
    own digest, not a global random state that earlier tests or pytest-randomly moved) and without the example
    database (which replays what failed in an earlier run, and writes .hypothesis/ into the checkout).
    CFGOPT_HYPOTHESIS_RANDOM=1 draws new examples, as the long exploratory runs do."""
    try:
        from hypothesis import settings
    except ImportError:  # the test extra is not installed: the property tests skip themselves
        return
    explore = os.environ.get("CFGOPT_HYPOTHESIS_RANDOM") == "1"
    settings.register_profile("cfgopt", derandomize=not explore, database=None, print_blob=True)
    settings.load_profile("cfgopt")


_seeded_hypothesis()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--full",
        action="store_true",
        help="run every example of the sampled tests (as CFGOPT_FULL_TESTS=1; CI does)",
    )


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("--full"):
        os.environ["CFGOPT_FULL_TESTS"] = "1"  # read by tests/support/sampling.py when the test modules are collected


def pytest_report_header(config: pytest.Config) -> str:
    from sampling import full

    which = "the full set" if full() else "a sampled set (--full or CFGOPT_FULL_TESTS=1: everything)"
    return f"cfgopt: {which}; HOME and caches in {SESSION_HOME}"


def pytest_unconfigure(config: pytest.Config) -> None:
    if _CREATED:
        shutil.rmtree(SESSION_HOME, ignore_errors=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _skip_slow_unless_full(items)
    _require_the_oracle()


def _skip_slow_unless_full(items: list[pytest.Item]) -> None:
    """A `slow` test runs only in a full run; a default run reports it skipped, saying how to run it."""
    from sampling import FULL_ONLY, full

    if full():
        return
    for item in items:
        if item.get_closest_marker("slow") is not None:
            item.add_marker(pytest.mark.skip(reason=FULL_ONLY))


def _require_the_oracle() -> None:
    """In CI (CFGOPT_REQUIRE_ORACLE=1) a missing real parser is a failure, not a skip: the oracle tests are
    what prove cfgopt's verdicts, so they must not vanish quietly."""
    if os.environ.get("CFGOPT_REQUIRE_ORACLE") != "1":
        return
    os.environ.setdefault("DISABLE_VERSION_CHECK", "1")
    try:
        import deepspeed  # noqa: F401
        import llamafactory  # noqa: F401
    except Exception as exc:
        raise pytest.UsageError(f"CFGOPT_REQUIRE_ORACLE=1 but the real parsers do not import: {exc}") from exc


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A compiled torch / DeepSpeed extension means some test built an op (a minute or more on 2 cores): fail
    the run, as tests/repository/test_suite_hygiene.py would for the one test it runs."""
    built = SESSION_HOME / ".cache" / "torch_extensions"
    if built.is_dir() and any(built.iterdir()):
        names = ", ".join(sorted(p.name for p in built.rglob("*.so"))) or "a build folder"
        session.config.get_terminal_writer().line(f"cfgopt: a test compiled an extension ({names}) in {built}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session", autouse=True)
def _temporary_folders_are_one_repository(tmp_path_factory: pytest.TempPathFactory) -> None:
    """cfgopt walks up from a config to the repository root (the folder holding `.git`) for dependency pins, the
    job's environment and project configs: a `.git` folder at the root of the tests' temporary folders ends that
    walk there, so a stray requirements.txt or cfgopt-environment.json in /tmp never judges a test's files."""
    (tmp_path_factory.getbasetemp() / ".git").mkdir(exist_ok=True)


@pytest.fixture(scope="session")
def verify_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One `--cache-dir` for the CPU runs of verify's real trainer: the tiny model, its tokenizer and the synthetic
    data are built once a session (each build is a few seconds of the 2-core machine); the cache is keyed by what it
    holds and written atomically, so the runs share it in any order."""
    return tmp_path_factory.mktemp("verify-cache")
