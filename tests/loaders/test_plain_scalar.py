"""Which values a fix writes as a plain YAML scalar (cfgopt/loaders/edits.py `_plain_safe`, str methods): those the
pattern `^[A-Za-z_./][A-Za-z0-9_./+-]*$` took, kept here as the oracle (issue 45)."""

from __future__ import annotations

import itertools
import re

from cfgopt.loaders.edits import _plain_safe

OLD = re.compile(r"^[A-Za-z_./][A-Za-z0-9_./+-]*$")


def test_plain_scalars_as_the_pattern_took_them() -> None:
    for n in range(5):
        for text in map("".join, itertools.product("aZ_./09+- \n:\u00e9", repeat=n)):
            assert _plain_safe(text) == bool(OLD.match(text)), text
