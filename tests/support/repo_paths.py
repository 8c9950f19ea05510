"""Where the repository and the tests' shared data are, wherever a test module sits in tests/."""

from __future__ import annotations

from pathlib import Path


def _repository_root() -> Path:
    """The checkout: the nearest folder above this file that holds both `pyproject.toml` and `cfgopt/`."""
    here = Path(__file__).resolve()
    return next(p for p in here.parents if (p / "pyproject.toml").is_file() and (p / "cfgopt").is_dir())


ROOT = _repository_root()
TESTS_DATA = ROOT / "tests" / "data"
