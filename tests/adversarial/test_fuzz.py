"""Short fuzz run for CI (the long one: scripts/fuzz_long.py, results in bench/fuzz.md)."""

from __future__ import annotations

import os

import pytest
from fuzz_targets import (
    OUTPUT_ENCODINGS,
    check_fix,
    check_loaders,
    check_outputs,
    check_script,
    json_documents,
    script_documents,
    yaml_documents,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sampling import examples

# 150 in a full run (--full, CI), 50 by default (tests/support/sampling.py); CFGOPT_FUZZ_EXAMPLES overrides both
EXAMPLES = int(os.environ.get("CFGOPT_FUZZ_EXAMPLES") or examples(150, 50))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))


@SETTINGS
@given(st.binary(max_size=400))
def test_loaders_never_raise_on_bytes(raw: bytes) -> None:
    check_loaders(raw)


@SETTINGS
@given(st.one_of(yaml_documents(), json_documents()))
def test_loaders_never_raise_on_near_configs(raw: bytes) -> None:
    check_loaders(raw)


@SETTINGS
@given(yaml_documents(), st.booleans())
def test_yaml_fix_converges(raw: bytes, unsafe: bool) -> None:
    check_fix("cfg.yaml", raw, unsafe)


@SETTINGS
@given(json_documents(), st.booleans())
def test_json_fix_converges(raw: bytes, unsafe: bool) -> None:
    check_fix("ds.json", raw, unsafe)


@SETTINGS
@given(script_documents(), st.booleans())
def test_script_fix_keeps_heredocs_and_strings(case, unsafe: bool) -> None:
    check_script(case, unsafe)


@SETTINGS
@given(
    st.one_of(yaml_documents().map(lambda raw: ("cfg.yaml", raw)), json_documents().map(lambda raw: ("ds.json", raw))),
    OUTPUT_ENCODINGS,
)
def test_outputs_on_a_terminal_that_is_not_utf8(case: tuple[str, bytes], encoding: str) -> None:
    check_outputs(*case, encoding)


@pytest.mark.parametrize("encoding", ["ascii", "cp1252"])
def test_fix_stdin_writes_what_is_left_on_a_terminal_that_is_not_utf8(encoding: str) -> None:
    """An example the test above found (on some runs): `fix -` wrote the findings left (a value `\u0663` quoted
    in a message) to a stderr that cannot encode it and raised UnicodeEncodeError; every output is escaped now."""
    raw = (
        b'{"\\ud800": 1, "a\\nb:1:1: error X": 2, "gradient_accumulation_steps": "\\u0663", '
        b'"ctivation_checkpointing": true, "zero_optimization": {"llgather_bucket_size": true}}'
    )
    check_outputs("ds.json", raw, encoding)
