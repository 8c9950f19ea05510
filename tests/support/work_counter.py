"""Deterministic measures of work, for the tests that guard against quadratic or endless work: a test asserts
how much work a call does (the same count on any machine), never how long it took (a loaded CI machine is 5-10x
slower; speed targets live in bench/)."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

from repo_paths import ROOT

PACKAGE = str(ROOT / "cfgopt")


def cfgopt_lines(call: Callable[[], object]) -> int:
    """How many lines of cfgopt's own code `call()` runs (Python's line trace events): a step count that a
    quadratic rescan or an endless loop makes grow, whatever the machine's speed."""
    count = 0

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal count
        count += event == "line"
        return local

    def trace(frame: FrameType, event: str, arg: Any) -> Any:
        return local if frame.f_code.co_filename.startswith(PACKAGE) else None

    previous = sys.gettrace()  # a coverage tracer, if any, is put back
    sys.settrace(trace)
    try:
        call()
    finally:
        sys.settrace(previous)
    return count


def assert_linear(run: Callable[[int], object], size: int, slack: float = 2.5) -> None:
    """`run(n)` does work linear in n: doubling n at most doubles its step count (plus `slack` for the fixed
    start); a quadratic one would quadruple it."""
    small, large = cfgopt_lines(lambda: run(size)), cfgopt_lines(lambda: run(2 * size))
    assert small > 0 and large <= slack * small, f"{small} steps for n={size}, {large} for n={2 * size}"


# ------------------------------------------------------------------------------------------- regex shapes
def _char_class(item: tuple) -> Callable[[str], bool] | None:
    """Membership of a one-character regex item (a literal, a class, `.`), None for anything else."""
    op, arg = item
    name = str(op)
    if name == "LITERAL":
        return lambda c: ord(c) == arg
    if name == "NOT_LITERAL":
        return lambda c: ord(c) != arg
    if name == "ANY":
        return lambda c: c != "\n"
    if name == "IN":
        return _in_class(arg)
    return None


_CATEGORIES = {"CATEGORY_SPACE": r"\s", "CATEGORY_DIGIT": r"\d", "CATEGORY_WORD": r"\w"}


def _in_class(members: list) -> Callable[[str], bool]:
    negate = bool(members) and str(members[0][0]) == "NEGATE"
    tests: list[Callable[[str], bool]] = []
    for op, arg in members[negate:]:
        name = str(op)
        if name == "LITERAL":
            tests.append(lambda c, a=arg: ord(c) == a)
        elif name == "RANGE":
            tests.append(lambda c, a=arg: a[0] <= ord(c) <= a[1])
        elif name == "CATEGORY":
            pattern = re.compile(_CATEGORIES.get(str(arg).replace("NOT_", ""), r"[\s\S]"))
            inverted = "NOT_" in str(arg)
            tests.append(lambda c, p=pattern, i=inverted: bool(p.fullmatch(c)) != i)
    return lambda c: any(t(c) for t in tests) != negate


_ALPHABET = [chr(i) for i in range(256)] + ["\u00e9", "\u2003", "\u4e00"]


def _overlap(a: Callable[[str], bool], b: Callable[[str], bool]) -> bool:
    return any(a(c) and b(c) for c in _ALPHABET)


def _chars_of(items: list) -> Callable[[str], bool]:
    """Every character a sub-pattern can consume (for a repeated group)."""
    tests = []
    for item in items:
        single = _char_class(item)
        if single is not None:
            tests.append(single)
            continue
        for part in item[1] if isinstance(item[1], (list, tuple)) else ():
            if isinstance(part, list) or hasattr(part, "data"):
                tests.append(_chars_of(list(part)))
            elif isinstance(part, tuple) and len(part) == 2 and isinstance(part[1], (list, tuple)):
                tests.append(_chars_of([part]))
    return lambda c: any(t(c) for t in tests)


def _unbounded(item: tuple) -> bool:
    return "REPEAT" in str(item[0]) and item[1][1] > 1


def _has_unbounded(items: list) -> bool:
    for op, arg in items:
        if "REPEAT" in str(op):
            if arg[1] > 1 or _has_unbounded(list(arg[2])):
                return True
        elif (str(op) == "SUBPATTERN" and _has_unbounded(list(arg[3]))) or (
            str(op) == "BRANCH" and any(_has_unbounded(list(alt)) for alt in arg[1])
        ):
            return True
    return False


def _walk(items: list, open_runs: list, problems: list[str]) -> list:
    """Read a sequence left to right, keeping the character sets of the unbounded repeats that may still be
    consuming (`open_runs`); a new unbounded repeat that can take a character one of them takes makes the
    split between them ambiguous: quadratic backtracking on a long run of that character."""
    for item in items:
        op, arg = str(item[0]), item[1]
        single = _char_class(item)
        if single is not None:  # a required character ends the runs it cannot belong to
            open_runs = [run for run in open_runs if _overlap(run, single)]
        elif "REPEAT" in op:
            low, high, body = arg[0], arg[1], list(arg[2])
            if high > 1:
                if _has_unbounded(body):
                    problems.append("a quantifier nested in a quantifier")
                chars = _char_class(body[0]) if len(body) == 1 and _char_class(body[0]) else _chars_of(body)
                if any(_overlap(run, chars) for run in open_runs):
                    problems.append("two unbounded repeats can take the same characters in a row")
                open_runs = [*open_runs, chars] if low == 0 else [chars]
            elif low == 0:  # optional: the runs before it stay open when it is skipped
                open_runs = open_runs + _walk(body, list(open_runs), problems)
            else:
                open_runs = _walk(body, open_runs, problems)
        elif op == "SUBPATTERN":
            open_runs = _walk(list(arg[3]), open_runs, problems)
        elif op == "BRANCH":
            ends = [_walk(list(alt), list(open_runs), problems) for alt in arg[1]]
            open_runs = [run for end in ends for run in end]
    return open_runs


def backtracking_hazards(pattern: re.Pattern[str]) -> list[str]:
    """Why `pattern` can backtrack quadratically or worse (empty: it cannot): a quantifier nested in another,
    or two unbounded repeats that may take the same character with only optional items between them (the
    shape of `\\s*(?:x)?\\s*`, which made a 3 KB requirement line take 42 s)."""
    from re import _parser  # the parser `re` itself uses (private, stable in 3.11-3.13)

    problems: list[str] = []
    _walk(list(_parser.parse(pattern.pattern, pattern.flags)), [], problems)
    return problems
