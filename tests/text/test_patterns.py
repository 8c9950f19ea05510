"""`lazy(..., needs=...)` (cfgopt/text/patterns.py): a text holding none of the literals every match needs is
answered without compiling, with the answer `re.compile` gives; every `needs` the package declares is checked
against its own pattern over texts built from the pattern's words (issue 45: the model-family and version patterns
were compiled on every seed lint, for names that cannot match them)."""

from __future__ import annotations

import importlib
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cfgopt.rules import rule_modules
from cfgopt.text.patterns import LazyPattern, lazy

MODULES = [
    "cfgopt.knowledge.model_family",
    "cfgopt.text.requirements.versions",
    "cfgopt.memory.states",
    *(f"cfgopt.rules.{m}" for m in rule_modules()),
]


def _patterns_with_needs() -> list[LazyPattern]:
    found: list[LazyPattern] = []
    for name in MODULES:
        for value in vars(importlib.import_module(name)).values():
            items = (
                [value]
                if not isinstance(value, tuple)
                else [x for v in value for x in (v if isinstance(v, tuple) else (v,))]
            )
            found += [p for p in items if isinstance(p, LazyPattern) and p.needs]
    return found


PATTERNS = _patterns_with_needs()
# what texts are built of: each pattern's words and literals, their upper-case, digits, separators, and letters
# that fold to ASCII under re.IGNORECASE (the Kelvin sign, the long s, the dotted I)
FRAGMENTS = sorted(
    {w for p in PATTERNS for w in (*re.findall(r"[a-z0-9$]+", p.pattern), *p.needs)}
    | {w.upper() for p in PATTERNS for w in p.needs}
    | set("0123456789-_./+{}$ \n")
    | {"\u212a", "\u017f", "\u0130", "distill", "-hf", "b"}
)


def test_the_package_declares_needs() -> None:
    assert len(PATTERNS) >= 15


@settings(max_examples=400)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=8).map("".join))
def test_every_needs_holds_for_its_pattern(text: str) -> None:
    """Where `needs` says no match, the pattern finds none."""
    for pattern in PATTERNS:
        if pattern.cannot_match(text):
            assert re.compile(pattern.pattern, pattern.flags).search(text) is None, (pattern, text)


def test_a_text_without_the_literals_compiles_nothing() -> None:
    pattern = lazy(r"\$\{[^}]*\}", needs=("${",))
    assert pattern.search("meta-llama/Meta-Llama-3-8B") is None and pattern._compiled is None
    assert [m.group() for m in pattern.finditer("a ${x} b")] == ["${x}"] and pattern._compiled is not None


@pytest.mark.parametrize("text", ["", "Qwen2-7B", "QWEN2", "qwen2", "q\u212a", "llama", "\u0130qwen2", "a\nqwen2"])
def test_needs_under_ignorecase_answers_as_re(text: str) -> None:
    pattern = lazy(r"qwen-?(2|3)(?![0-9])", re.IGNORECASE, needs=("qwen",))
    plain = re.compile(pattern.pattern, pattern.flags)
    for method in ("match", "fullmatch", "search"):
        got, want = getattr(pattern, method)(text), getattr(plain, method)(text)
        assert (got and got.span()) == (want and want.span())
    assert pattern.findall(text) == plain.findall(text)
    assert [m.span() for m in pattern.finditer(text)] == [m.span() for m in plain.finditer(text)]


def test_needs_under_ignorecase_are_lower_case_ascii() -> None:
    with pytest.raises(ValueError, match="lower-case ASCII"):
        lazy("Qwen", re.IGNORECASE, needs=("Qwen",))
