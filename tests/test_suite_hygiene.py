"""The test suite stays in its tree: HOME, the XDG folders and every cache the real tools write (huggingface,
torch extensions, matplotlib, pip, ...) point into the session's own folder (tests/conftest.py), and no
DeepSpeed op is compiled (the oracle harness skips the shared-memory op DeepSpeed builds on a CPU)."""

from __future__ import annotations

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
    test = "tests/test_oracle_seed.py::test_seed_fixed_launch_accepted_with_deepspeed_followed"
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
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_layout.py", "-k", "no_such_test"],
        cwd=ROOT,
        env={**os.environ, "CFGOPT_TEST_HOME": str(tmp_path / "session")},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 5, proc.stdout[-2000:]
