"""Integers in text cfgopt did not write: a GPU count in a launch script, a DeepSpeed value written as a string,
`CUDA_VISIBLE_DEVICES`, a version's parts, an environment variable.

`str.isdigit()` is true for `²` and `①`, which `int()` refuses (ValueError), and `int()` takes `٣` (an Arabic-
Indic digit), `1_000` and surrounding spaces, which a shell word, JSON or a version number never mean as a
number. `integer` is the one reading of such text: ASCII digits only, an optional sign where asked, else None
(unknown: the caller judges nothing, never raises). `tests/repository/test_closed_classes.py` fails on an `int(` of user
text elsewhere.

`is_int` is the one test of a parsed value (YAML, JSON) for an integer: `bool` is a subclass of `int`, so
`isinstance(True, int)` holds, and `batch_size: true` must not count as a batch of one.
"""

from __future__ import annotations

import re

_DIGITS = re.compile(r"[0-9]+", re.ASCII)
_SIGNED = re.compile(r"[+-]?[0-9]+", re.ASCII)
MAX_DIGITS = 4300  # Python's own limit for int() of a str (sys.get_int_max_str_digits); beyond it, no number


def integer(text: object, *, signed: bool = False, strip: bool = False) -> int | None:
    """`text` as an integer when it is one written in ASCII digits (with a leading `+`/`-` if `signed`,
    surrounding whitespace ignored if `strip`); else None."""
    if not isinstance(text, str):
        return None
    if strip:
        text = text.strip()
    if len(text) > MAX_DIGITS or (_SIGNED if signed else _DIGITS).fullmatch(text) is None:
        return None
    return int(text)


def is_int(value: object) -> bool:
    """Is `value` an int and not a bool (YAML's `true` and JSON's `true` are no count)?"""
    return isinstance(value, int) and not isinstance(value, bool)


def is_integer(text: object, *, signed: bool = False, strip: bool = False) -> bool:
    """Is `text` an integer as `integer` reads it (the ASCII counterpart of `str.isdigit()`)?"""
    return integer(text, signed=signed, strip=strip) is not None
