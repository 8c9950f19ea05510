"""The built-in rules: one module per rule, `<code>_<name>.py`, found here by name so that adding a rule
never means editing a shared list. Modules starting with `_` are helpers shared by several rules.
See docs/architecture.md and the generated docs/rules.md."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from functools import cache

from cfgopt.rules.base import Rule

_RULE_MODULE = re.compile(r"^[a-z]+\d{3}_\w+$")


@cache
def rule_classes() -> tuple[type[Rule], ...]:
    found: list[type[Rule]] = []
    for info in pkgutil.iter_modules(__path__):
        if not _RULE_MODULE.match(info.name):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        classes = [
            c
            for _, c in inspect.getmembers(module, inspect.isclass)
            if issubclass(c, Rule) and c is not Rule and c.__module__ == module.__name__
        ]
        if len(classes) != 1:
            raise RuntimeError(f"{module.__name__} must define exactly one Rule subclass, found {len(classes)}")
        found.append(classes[0])
    prefix_order = {"CFG": 0, "LF": 1, "DS": 2, "XF": 3, "PF": 4, "MEM": 5}
    found.sort(key=lambda c: (prefix_order.get(c.code.rstrip("0123456789"), 9), c.code))
    return tuple(found)


@cache
def all_rules() -> tuple[Rule, ...]:
    return tuple(cls() for cls in rule_classes())


def by_code(code: str) -> Rule | None:
    wanted = code.upper()
    return next((r for r in all_rules() if r.code == wanted or r.name == code), None)


@cache
def opt_in_codes() -> frozenset[str]:
    """Rules outside the default selection (`Rule.default_on = False`): they run only when selected."""
    return frozenset(c.code for c in rule_classes() if not c.default_on)
