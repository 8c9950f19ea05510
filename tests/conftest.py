from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# tests/ holds shared helpers (rule_cases.py, oracle_harness.py) imported by the test modules.
sys.path.insert(0, str(Path(__file__).resolve().parent))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
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
