"""cfgopt's YAML loader against the real one: LLaMA-Factory 0.9.5 reads YAML with
`OmegaConf.to_container(OmegaConf.load(path))` (omegaconf 2.4), so cfgopt must see the same Python value, and
must reject a file exactly when OmegaConf does.

"cfgopt rejects" means: `load_yaml(...).error` is set, or the loaded tree holds a repeated key in one mapping
(cfgopt reports that as the error-severity CFG002 diagnostic instead of a loader error, by design:
yaml_loader.py docstring). Values are compared strictly (type and value; 1, 1.0 and True differ), NaN equal to
NaN. Any difference fails the test: it is a bug in cfgopt's loader (or a documented decision to revisit).

omegaconf is only in the `oracle` extra, so these tests skip without it.
"""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("omegaconf")
hypothesis = pytest.importorskip("hypothesis")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

from cfgopt.loaders.yaml_loader import load_yaml  # noqa: E402
from cfgopt.text.document import Document  # noqa: E402
from cfgopt.text.source import Node  # noqa: E402

pytestmark = pytest.mark.oracle

from oracle_harness import CORPUS  # noqa: E402  # one place says where the corpus is
from repo_paths import ROOT  # noqa: E402

EXAMPLES = int(os.environ.get("CFGOPT_PARITY_EXAMPLES", "400"))


# --------------------------------------------------------------------------------------------- helpers


def omegaconf_view(path: Path) -> tuple[bool, Any]:
    """(ok, value or error text) as LLaMA-Factory's `read_args` gets it."""
    try:
        return True, OmegaConf.to_container(OmegaConf.load(path))
    except Exception as exc:  # noqa: BLE001 - any exception means LLaMA-Factory stops at start-up
        return False, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


def _has_duplicate(node: Node | None) -> bool:
    if node is None:
        return False
    keys = [e.key for e in node.entries or () if e.key_is_str]  # as CFG002: OmegaConf checks string keys only
    if len(keys) != len(set(keys)):
        return True
    return any(_has_duplicate(e.node) for e in node.entries or ()) or any(_has_duplicate(i) for i in node.items or ())


def cfgopt_view(path: Path) -> tuple[bool, Any]:
    src = load_yaml(Document.from_bytes(path, path.read_bytes()))
    if src.error is not None:
        return False, src.error.message
    if _has_duplicate(src.root):
        return False, "duplicate key (CFG002)"
    return True, src.data


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def assert_parity(path: Path) -> None:
    om_ok, om = omegaconf_view(path)
    cf_ok, cf = cfgopt_view(path)
    text = path.read_text(encoding="utf-8", errors="replace")
    shown = text if len(text) < 400 else text[:400] + "..."
    assert om_ok == cf_ok, (
        f"OmegaConf {'accepts' if om_ok else 'rejects'} but cfgopt "
        f"{'accepts' if cf_ok else 'rejects'}:\n{shown}\nOmegaConf: {om!r}\ncfgopt: {cf!r}"
    )
    if om_ok:
        assert same(om, cf), f"values differ:\n{shown}\nOmegaConf: {om!r}\ncfgopt:    {cf!r}"


def write(text: str) -> Path:
    fd, name = tempfile.mkstemp(suffix=".yaml", dir=_TMP.name)
    with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    return Path(name)


_TMP = tempfile.TemporaryDirectory(prefix="cfgopt-parity-")


# --------------------------------------------------------------------------------------------- real files


def _real_yaml_files() -> list[Path]:
    out: list[Path] = []
    for base in (CORPUS, ROOT / "fixtures"):
        if base.is_dir():
            out += sorted(p for p in base.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())
    return out


REAL = _real_yaml_files()


@pytest.mark.parametrize("path", REAL, ids=[str(p) for p in REAL])
def test_real_yaml_parity(path: Path) -> None:
    assert_parity(path)


def test_real_yaml_files_found() -> None:
    assert any(p.is_relative_to(ROOT / "fixtures") for p in REAL)
    if CORPUS.is_dir():
        assert sum(p.is_relative_to(CORPUS) for p in REAL) >= 80


# --------------------------------------------------------------------------------------------- edge cases

# Whole documents whose reading is easy to get wrong. Each is its own test so every difference shows.
EDGE_DOCUMENTS: dict[str, str] = {
    "empty-file": "",
    "comment-only": "# nothing here\n",
    "scalar-document": "just_a_word\n",
    "list-document": "- a\n- b\n",
    "duplicate-top-level": "a: 1\na: 2\n",
    "duplicate-nested": "a:\n  b: 1\n  b: 2\n",
    "int-and-str-key-conflict": "'1': a\n1: b\n",
    "null-key": "null: a\n",
    "tilde-key": "~: a\n",
    "bool-key": "true: a\n",
    "float-key": "1.5: a\n",
    "merge-key": "base: &b {x: 1}\nchild:\n  <<: *b\n  y: 2\n",
    "alias": "a: &x [1, 2]\nb: *x\n",
    "interpolation-kept": "a: ${b}\nb: 1\n",
    "interpolation-unclosed": "a: ${b\n",
    "interpolation-quoted-open": "a: '${'\n",
    "interpolation-inside-text": "a: x${y\n",
    "interpolation-escaped": "a: \\${x}\n",
    "explicit-set-tag": "a: !!set {x}\n",
    "explicit-timestamp-tag": "a: !!timestamp 2024-01-01\n",
    "explicit-binary-tag": "a: !!binary aGVsbG8=\n",
    "explicit-str-tag": "a: !!str 1\n",
    "explicit-float-tag": "a: !!float 1\n",
    "custom-tag": "a: !custom 1\n",
    "two-documents": "a: 1\n---\nb: 2\n",
    "document-end": "a: 1\n...\n",
    "block-literal": "a: |\n  text\n",
    "tab-indent": "\ta: 1\n",
    "unclosed-quote": "a: 'x\n",
    "mapping-in-value": "a: b: c\n",
    "crlf": "a: 1\r\nb: yes\r\n",
    "bom": "\ufeffa: 1\n",
    "complex-key": "? [a]\n: 1\n",
    "empty-complex-key": "a: 1\n? \n: 1\n",
    "empty-complex-key-in-list": "a:\n  - ?\n",
    "non-str-duplicate-key": "1: a\n1: b\n",
    "bool-duplicate-key": "yes: a\nyes: b\n",
    "str-and-merged-key": "base: &b {x: 1}\nchild:\n  <<: *b\n  x: 2\n",
    "quoted-and-plain-duplicate": "a: 1\n'a': 2\n",
}


@pytest.mark.parametrize("name", sorted(EDGE_DOCUMENTS))
def test_edge_document_parity(name: str) -> None:
    assert_parity(write(EDGE_DOCUMENTS[name]))


# --------------------------------------------------------------------------------------------- property

TRICKY_SCALARS = [
    "yes",
    "no",
    "on",
    "off",
    "y",
    "n",
    "Y",
    "N",
    "Yes",
    "NO",
    "On",
    "OFF",
    "True",
    "true",
    "FALSE",
    "false",
    "~",
    "null",
    "Null",
    "NULL",
    "",
    "1e-4",
    "1.0e-4",
    "1E5",
    "1e5",
    "5e-05",
    "1_000",
    "1_000.5",
    "0x10",
    "0x_1A",
    "-0x10",
    "010",
    "08",
    "0o10",
    "0b101",
    "0b1_0",
    ".5",
    "+.5",
    "-.5",
    "+1",
    "-0",
    "0.",
    "1.e5",
    ".5e3",
    "6.8523015e+5",
    "685.230_15e+03",
    "inf",
    "nan",
    ".inf",
    "-.inf",
    "+.inf",
    ".Inf",
    ".nan",
    ".NaN",
    "2024-01-01",
    "2024-01-01 10:00:00",
    "2001-12-14t21:59:43.10-05:00",
    "'quoted'",
    '"1e9"',
    "'yes'",
    '"null"',
    "3:20",
    "12:30:45",
    "1:2:3.5",
    "190:20:30.15",
    "1:60",
    "-1_0",
    "1__0",
    "0_",
    "1e",
    "._5",
    "${a}",
    "${oc.env:HOME}",
    "${a",
    "x${y",
    "'${'",
    "\\${x}",
    "''",
    '""',
    "[1, 2]",
    "{a: 1}",
    "[]",
    "{}",
    "!!str 1",
    "!!float 1",
    "!!int 3",
    "!!bool yes",
    "!!null ''",
    "a # comment",
    "fa2",
    "sdpa",
    "bf16",
    "- x",
    "'multi word'",
    "@x",
    "`x",
    "%x",
    "a: b",
    "=",
    "?",
    "*undefined",
    "&anchor 1",
    "<<",
]
KEYS = [
    "model_name_or_path",
    "stage",
    "bf16",
    "flash_attn",
    "learning_rate",
    "lora_rank",
    "a",
    "b",
    "yes",
    "1",
    "null",
    "0x10",
    "1.5",
    "true",
    "'1'",
    "'on'",
    "2024-01-01",
    "x_y",
    "k-1",
]

numeric_text = st.from_regex(r"[-+]?[0-9_]{0,4}(\.[0-9_]{0,3})?([eE][-+]?[0-9]{1,2})?", fullmatch=True)
sexagesimal_text = st.from_regex(r"[-+]?[0-9]{1,2}(:[0-9]{1,2}){1,2}(\.[0-9]{0,2})?", fullmatch=True)
scalar_text = st.one_of(st.sampled_from(TRICKY_SCALARS), numeric_text, sexagesimal_text)


@st.composite
def flat_mappings(draw: st.DrawFn) -> str:
    n = draw(st.integers(min_value=1, max_value=6))
    keys = draw(st.lists(st.sampled_from(KEYS), min_size=n, max_size=n))
    lines = [f"{k}: {draw(scalar_text)}".rstrip() for k in keys]
    return "\n".join(lines) + "\n"


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(flat_mappings())
def test_flat_mapping_parity(text: str) -> None:
    assert_parity(write(text))


@settings(max_examples=EXAMPLES, deadline=None)
@given(scalar_text)
def test_single_scalar_parity(token: str) -> None:
    """One value under a plain key: isolates scalar resolution from key handling."""
    assert_parity(write(f"k: {token}".rstrip() + "\n"))
