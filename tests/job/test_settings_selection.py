"""`Settings.is_selected` answers as ruff's longest-prefix rule does, its shortcuts included (an empty
`extend_select` or `ignore` is not read): every rule code against every mix of a few selections."""

from __future__ import annotations

from itertools import product

from cfgopt.job.settings import Settings
from cfgopt.knowledge.rule_catalog import OPT_IN, RULES


def _longest(code: str, prefixes: list[str]) -> int:
    return max((len(p) for p in prefixes if code.startswith(p) or p == "ALL"), default=-1)


def _selected(code: str, select: list[str], extend: list[str], ignore: list[str]) -> bool:
    """The rule as written out: the longest matching prefix wins, a tie goes to `ignore`; without `select`, the
    default selection (every rule but the opt-in ones) plus `extend`."""
    ignored = _longest(code, ignore)
    if select:
        picked = _longest(code, select + extend)
    elif _longest(code, extend) > ignored and _longest(code, extend) >= 0:
        return True
    else:
        picked = -1 if code in OPT_IN else 0
    return picked >= 0 and (ignored < 0 or picked > ignored)


CHOICES = ([], ["ALL"], ["PF"], ["PF003"], ["LF", "DS0"])


def test_every_code_under_every_mix_of_selections() -> None:
    codes = sorted({entry[0] for entry in RULES.values()})
    for select, extend, ignore in product(CHOICES, repeat=3):
        settings = Settings(select=select, extend_select=extend, ignore=ignore)
        for code in codes:
            assert settings.is_selected(code) == _selected(code, select, extend, ignore), (code, select, extend, ignore)


def test_the_default_selection_is_every_rule_but_the_opt_in_ones() -> None:
    settings = Settings()
    assert {entry[0] for entry in RULES.values() if not settings.is_selected(entry[0])} == OPT_IN
