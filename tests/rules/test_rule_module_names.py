r"""Which files of cfgopt/rules/ are rule modules (`cfgopt.rules._is_rule_module`, str methods): the names the
pattern `^[a-z]+\d{3}_\w+$` took, kept here as the oracle (issue 45: every run asks it of every file there)."""

from __future__ import annotations

import os
import re

from hypothesis import given, settings
from hypothesis import strategies as st

import cfgopt.rules
from cfgopt.rules import _is_rule_module, rule_modules

OLD = re.compile(r"^[a-z]+\d{3}_\w+$")
EXAMPLES = [
    *("lf001_unknown_key", "mem003_x", "lf01_x", "lf0011_x", "LF001_x", "lf001_", "lf001_x\n", "lf001_x\n\n"),
    *("lf001_x-y", "_lf001_x", "lf\u0663\u0661\u0662_x", "lf001_\u00e9\u00b2", "lf001__", "support", "base", ""),
]


def test_the_examples_and_the_folder_are_read_as_by_the_pattern() -> None:
    for stem in EXAMPLES:
        assert _is_rule_module(stem) == bool(OLD.match(stem)), stem
    stems = [n[:-3] for n in os.listdir(os.path.dirname(cfgopt.rules.__file__)) if n.endswith(".py")]
    assert set(rule_modules()) == {s for s in stems if OLD.match(s)}


@settings(max_examples=400)
@given(
    st.sampled_from(["", "lf", "mem", "A", "x_"]),
    st.text(alphabet="0129\u0663\u00b2_", max_size=5),
    st.text(alphabet="abZ_09-\n \u00e9\u00b2\u0663\u2160", max_size=6),
)
def test_generated_names_are_read_as_by_the_pattern(prefix: str, digits: str, rest: str) -> None:
    stem = prefix + digits + rest
    assert _is_rule_module(stem) == bool(OLD.match(stem)), stem
