"""The requirement lines pip stops on (`refused_requirement`, CFG001 on a requirements*.txt) against the real
parsers: pip 23.2.1's own `parse_req_from_line` (packaging 21.3, legacy specifiers read) and packaging 26 (what
pip 24.1 and later parse with). A line cfgopt refuses is one both pips stop on: packaging 26 refuses it, and pip
23.2.1 refuses it too or reads only legacy `==` clauses, which equal no release. Never a line either pip installs
(principle 1: a false error costs more than a missed one); the named cases keep what it must find."""

from __future__ import annotations

import random
import warnings
from collections.abc import Callable
from typing import Any

import pytest
from packaging.markers import InvalidMarker, Marker
from packaging.requirements import InvalidRequirement, Requirement
from requirement_reads import first_failures
from sampling import full

from cfgopt.text.requirements.pip_files import refused_requirement


def _pip23() -> tuple[Callable[..., Any], type]:
    """pip's own line parser and its legacy specifier class, as pip before 24.1 has them (a fresh Python 3.11
    venv brings pip 23 or 24.0); a later pip has no legacy specifiers, and the comparison with it is skipped."""
    with warnings.catch_warnings():  # pip's own import warnings (pkg_resources, distutils): not ours
        warnings.simplefilter("ignore")
        import setuptools  # noqa: F401 (before pip: pip's imports would load the stdlib's distutils, which it refuses)
        from pip._internal.req.constructors import parse_req_from_line

        try:
            from pip._vendor.packaging.specifiers import LegacySpecifier
        except ImportError:
            pytest.skip("needs a pip before 24.1 (its legacy specifiers) to compare with")
    return parse_req_from_line, LegacySpecifier


CASES = 4000 if full() else 600
NAMES = ["torch", "llamafactory", "Flash_Attn", "deepspeed", "foo", "a.b-c", "foo_", "-foo", "foo bar", "x[y"]
EXTRAS = ["", "", "[metrics]", "[torch, deepspeed]", " [x]", "[]", "[x", "[x,]", "[1x]"]
SPECS = ["", "==0.9.3", ">=2.4,<2.6", " >= 2.4 , < 2.6", "~=0.9.5", "==2.5.*", "==2.5.1+cu121", " (>=1.0)", "===x"]
SPECS += ["==", "=0.9.3", " 0.9.3", ">=latest", "!=x", "==latest", ">=1.0.*", "~=1", ">=1.0 bar", "==1.0,"]
SPECS += ["==1.0,,", "<", "==1.0)", "(>=1.0", "== ", ">=2.5.1+cu121", "==1.0[x]", "=>1.0", "==1.0;", ">=1,==bad"]
MARKERS = ["", "", ' ; python_version >= "3.9"', ";sys_platform=='linux'", "; bogus", "; os_name = 'nt'", ";"]


def _line(r: random.Random) -> str:
    return f"{r.choice(NAMES)}{r.choice(EXTRAS)}{r.choice(SPECS)}{r.choice(MARKERS)}"


def _modern_reads(text: str) -> bool:
    """pip 24.1 and later (`parse_req_from_line`): the marker split off at the first `;` and parsed alone (an empty
    one is none), the requirement before it, each as packaging 22+ parses them."""
    before, _, marker = text.partition(";")
    try:
        Requirement(before)
        if marker.strip():
            Marker(marker.strip())
    except (InvalidRequirement, InvalidMarker):
        return False
    return True


def _pip23_stops(text: str) -> bool:
    """pip 23.2.1 stops on the line: its parser raises, or it reads a legacy `==` clause (no release equals it)."""
    parse_req_from_line, legacy_specifier = _pip23()
    try:
        parts = parse_req_from_line(text, None)
    except Exception:  # noqa: BLE001 (InstallationError, InvalidMarker: the file installs nothing)
        return True
    legacy = [s for s in (parts.requirement.specifier if parts.requirement else []) if isinstance(s, legacy_specifier)]
    return any(s.operator == "==" for s in legacy)


def _check(seed: int) -> str:
    r = random.Random(seed)
    line = _line(r)
    refused = refused_requirement(line + "\n")
    if refused is None:
        return ""
    if _modern_reads(line) or not _pip23_stops(line):
        return f"seed {seed}: {line!r} refused, but pip reads it"
    if refused.text != line.strip():
        return f"seed {seed}: {line!r} refused as {refused.text!r}"
    return ""


def test_a_refused_line_is_one_every_pip_stops_on() -> None:
    assert first_failures(range(CASES), _check) == []


@pytest.mark.parametrize(
    "line",
    [
        "llamafactory==",  # pip 23.2.1: a legacy `==` nothing equals; 24.1 and later: Invalid requirement
        "torch=2.5.1",  # pip's hint: `=` is not a valid operator
        "torch 2.5.1",
        "deepspeed>=0.16 deepspeed<0.17",
        "torch~=2",
        "flash-attn[x",
        'torch; python_version >= "3.9" and',
        "transformers==latest",
    ],
)
def test_lines_every_pip_stops_on_are_refused(line: str) -> None:
    assert not _modern_reads(line) and _pip23_stops(line)
    refused = refused_requirement(f"# pinned\n{line}  # comment\n")
    assert refused is not None and refused.text == line and refused.start == len("# pinned\n")


@pytest.mark.parametrize(
    "line",
    [
        "torch>=latest",  # pip 23.2.1 reads a legacy `>=` and installs a release: not every pip stops
        "deepspeed!=x",
        "torch>=2.5.*",
        "./vendor/pkg",  # a path, a URL or an archive: whether it installs is the node's to say
        "vendor/torch-2.5.1-cp311-none-any.whl",
        "torch-2.5.1.tar.gz",
        "git+https://github.com/o/r.git#egg=peft",
        "https://example.com/x.whl",
        "torch==${TORCH_VERSION}",  # pip substitutes the node's variable
        "-e .",
        "--index-url https://download.pytorch.org/whl/cu121",
        "torch==2.5.1 --hash=sha256:abc",
        "torch (>=2.4)",
    ],
)
def test_lines_some_pip_reads_or_the_node_decides_are_not_refused(line: str) -> None:
    assert refused_requirement(line + "\n") is None


def test_a_line_split_by_a_continuation_is_refused_where_it_starts() -> None:
    text = "torch==2.5.1\nllamafactory \\\n  ==\n"
    refused = refused_requirement(text)
    assert refused is not None and refused.start == text.index("llamafactory") and refused.name == "llamafactory"
