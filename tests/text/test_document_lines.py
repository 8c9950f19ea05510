"""Where lines start (cfgopt/text/document.py `line_starts`): a text whose only breaks are `\n` is split without the
syntax's pattern (issue 45: compiled on every run for files that have no other break), with the pattern's answer."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cfgopt.text.document import LINE_BREAKS, line_starts

ALPHABET = "a \n\r\x85\u2028\u2029\t"


def _by_pattern(text: str, syntax: str) -> list[int]:
    return [0, *(m.end() for m in LINE_BREAKS[syntax].compiled.finditer(text))]


@pytest.mark.parametrize("syntax", sorted(LINE_BREAKS))
def test_line_starts_answer_as_the_pattern_exhaustively(syntax: str) -> None:
    for n in range(6):
        for text in map("".join, itertools.product(ALPHABET, repeat=n)):
            assert line_starts(text, syntax) == _by_pattern(text, syntax), (syntax, text)


@settings(max_examples=200)
@given(st.text(alphabet=ALPHABET + "é😀", max_size=60), st.sampled_from(sorted(LINE_BREAKS)))
def test_line_starts_answer_as_the_pattern(text: str, syntax: str) -> None:
    assert line_starts(text, syntax) == _by_pattern(text, syntax)
