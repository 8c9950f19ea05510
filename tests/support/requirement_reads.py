"""What the differential tests of the requirement readers compare (tests/text/test_requirements_*_parsers.py): a
requirement as `packaging` reads it and a cfgopt `Pin` in the same terms, and the first failing seeds of a run."""

from __future__ import annotations

from collections.abc import Callable

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet

from cfgopt.text.requirements.requirement import Pin, normalise

Read = tuple[str, str, tuple[str, ...]]  # (normalised name, specifier or `@ url`, normalised extras)


def requirement_read(req: Requirement) -> Read:
    spec = "@ " + req.url if req.url else str(req.specifier)
    return normalise(req.name), spec, tuple(sorted(normalise(e) for e in req.extras))


def packaging_read(text: str) -> Read | None:
    try:
        return requirement_read(Requirement(text))
    except InvalidRequirement:
        return None


def pin_read(pin: Pin) -> Read:
    try:
        spec = pin.spec if pin.spec.startswith("@") else str(SpecifierSet(pin.spec))
    except InvalidSpecifier:
        spec = "unreadable: " + pin.spec
    return pin.name, spec, tuple(sorted(pin.extras))


def first_failures(seeds: range, check: Callable[[int], str]) -> list[str]:
    """The messages of the first three seeds whose check fails (a check returns "" when it passes)."""
    failures = [message for seed in seeds if (message := check(seed))]
    return failures[:3]
