"""What more than one verify test module reads, made once a session on first use, whichever test asks first, in
the session's temporary folders: a CPU run of verify's real trainer (tests/support/verify_runs.py; 15-20 s on 2
cores, most of it the worker importing LLaMA-Factory), and a child with LLaMA-Factory imported
(tests/support/llamafactory_child.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from llamafactory_child import LlamaFactoryChild
from verify_runs import NEAT_PACKED_FLASH_TRUE, VerifyRun, verify_tiny


@pytest.fixture(scope="session")
def neat_packed_fix_run(tmp_path_factory: pytest.TempPathFactory, verify_cache: Path) -> VerifyRun:
    """`cfgopt verify` of NEAT_PACKED_FLASH_TRUE against `cfgopt fix`'s copy (the default): the original's crash
    and the fix (tests/verify/test_verify.py), and the token count of a neat-packed run under SDPA
    (tests/verify/test_verify_tokens.py). 3 steps: one of warm-up and two measured, whatever the machine's load
    (comparison.warmup_steps drops at least one, at most half)."""
    pytest.importorskip("llamafactory")
    folder = tmp_path_factory.mktemp("neat-packed-fix-run")
    return verify_tiny(folder, NEAT_PACKED_FLASH_TRUE, verify_cache, "--steps", "3")


@pytest.fixture(scope="session")
def llamafactory_child(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaFactoryChild]:
    """One child for the scripts that run LLaMA-Factory's own data code (tests/support/llamafactory_child.py):
    it imports LLaMA-Factory once for all of them."""
    child = LlamaFactoryChild(tmp_path_factory.mktemp("llamafactory-child") / "stderr.log")
    yield child
    child.close()
