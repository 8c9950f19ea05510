"""Integers in text, and numbers in parsed values, cfgopt did not write: a GPU count in a launch script, a DeepSpeed
value written as a string, `CUDA_VISIBLE_DEVICES`, a version's parts, an environment variable, a YAML count.

`str.isdigit()` is true for `²` and `①`, which `int()` refuses (ValueError), and `int()` takes `٣` (an Arabic-
Indic digit), `1_000` and surrounding spaces, which a shell word, JSON or a version number never mean as a
number. `integer` is the one reading of such text: ASCII digits only, an optional sign where asked, else None
(unknown: the caller judges nothing, never raises). `tests/repository/test_closed_classes.py` fails on an `int(` of user
text elsewhere.

Numbers in parsed values (YAML, JSON, TOML) are read here too: `bool` is a subclass of `int`, so
`isinstance(True, int)` holds, and `batch_size: true` must not count as a batch of one. `is_int` (an integer),
`is_number` (an integer or a float), `positive_int` (a count, up to a limit) and `as_float` (a number as a float,
never OverflowError) are the one reading of "a number that is not a bool"; `tests/repository/test_closed_classes.py`
fails on the guard re-typed elsewhere. A plain `isinstance(x, bool)` stays where the question is "is it a bool".
"""

from __future__ import annotations

import math

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TypeGuard

MAX_DIGITS = 4300  # Python's own limit for int() of a str (sys.get_int_max_str_digits); beyond it, no number


def integer(text: object, *, signed: bool = False, strip: bool = False) -> int | None:
    """`text` as an integer when it is one written in ASCII digits (with a leading `+`/`-` if `signed`,
    surrounding whitespace ignored if `strip`); else None."""
    if not isinstance(text, str):
        return None
    if strip:
        text = text.strip()
    digits = text[1:] if signed and text[:1] in ("+", "-") else text
    # ASCII digits only: `[0-9]+` (isdigit alone takes `²`); a str method, no pattern to compile on the CLI's import
    if len(text) > MAX_DIGITS or not (digits.isascii() and digits.isdigit()):
        return None
    return int(text)


def is_int(value: object) -> TypeGuard[int]:
    """Is `value` an int and not a bool (YAML's `true` and JSON's `true` are no count)?"""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> TypeGuard[int | float]:
    """Is `value` an int or a float and not a bool? (NaN and the infinities are numbers here: a caller that
    compares with a range refuses them, as NaN fails every comparison.)"""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def positive_int(value: object, most: int | None = None) -> int | None:
    """`value` when it is an int (not a bool) above 0 and, where `most` is given, at most `most`; else None."""
    if is_int(value) and value > 0 and (most is None or value <= most):
        return value
    return None


def as_float(value: object) -> float | None:
    """A number (not a bool) as a float, None for anything else; an integer beyond the float range is the
    infinity of its sign, which compares with every finite threshold as the integer does (never OverflowError)."""
    if not is_number(value):
        return None
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def is_integer(text: object, *, signed: bool = False, strip: bool = False) -> bool:
    """Is `text` an integer as `integer` reads it (the ASCII counterpart of `str.isdigit()`)?"""
    return integer(text, signed=signed, strip=strip) is not None
