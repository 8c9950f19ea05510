"""The one reading of a number in a parsed value (cfgopt/text/user_text.py): `bool` subclasses `int`, so YAML's and
JSON's `true` pass `isinstance(value, int)`; `is_int`, `is_number`, `positive_int` and `as_float` refuse it."""

from __future__ import annotations

import math

import pytest

from cfgopt.text.user_text import as_float, integer, is_int, is_number, positive_int

NOT_NUMBERS = (True, False, "3", "1e3", None, [3], {"a": 3})


def test_is_number_takes_ints_and_floats_only() -> None:
    assert all(is_number(v) for v in (0, -1, 3, 10**400, 0.5, -2.0, math.inf, math.nan))
    assert not any(is_number(v) for v in NOT_NUMBERS)


@pytest.mark.parametrize(
    ("value", "most", "expected"),
    [
        (1, None, 1),
        (10**400, None, 10**400),
        (8, 8, 8),
        (9, 8, None),
        (0, None, None),
        (-3, None, None),
        (True, None, None),
        (2.0, None, None),  # an integral float is no int here (memory's `integer_at` reads those)
        ("4", None, None),
    ],
)
def test_positive_int(value: object, most: int | None, expected: int | None) -> None:
    assert positive_int(value, most) == expected


def test_as_float_never_overflows() -> None:
    assert as_float(3) == 3.0 and isinstance(as_float(3), float)
    assert as_float(10**400) == math.inf and as_float(-(10**400)) == -math.inf
    assert math.isnan(as_float(math.nan))
    assert not any(as_float(v) is not None for v in NOT_NUMBERS)


def test_is_int_refuses_floats_and_bools() -> None:
    assert is_int(0) and is_int(-1)
    assert not any(is_int(v) for v in (*NOT_NUMBERS, 3.0))


def test_integer_reads_as_the_ascii_digit_pattern() -> None:
    """`integer` (str methods) reads every short text as `[+-]?[0-9]+` under re.ASCII did (the pattern it
    replaced, kept here as the oracle): `²`, `٣`, blanks and `_` are no digits."""
    import itertools
    import re

    digits, signed = re.compile(r"[0-9]+", re.ASCII), re.compile(r"[+-]?[0-9]+", re.ASCII)
    alphabet = "09+- _\n\u00b2\u0663a"
    for n in range(5):
        for text in map("".join, itertools.product(alphabet, repeat=n)):
            for sign, pattern in ((False, digits), (True, signed)):
                want = int(text) if pattern.fullmatch(text) else None
                assert integer(text, signed=sign) == want, (text, sign)
                stripped = text.strip()
                want = int(stripped) if pattern.fullmatch(stripped) else None
                assert integer(text, signed=sign, strip=True) == want, (text, sign)
