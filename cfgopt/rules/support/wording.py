"""Small wording helpers for messages (one place, so every rule says it the same way)."""

from __future__ import annotations

import re

from cfgopt.text.patterns import lazy

# Read aloud, these start with a vowel sound: 8, 11, 18, 80 ("eight", "eleven", "eighty"), H100 ("aitch"),
# MI300X ("em-eye"), and words starting with a vowel letter.
_AN = lazy(r"^(?:[aeiou]|8|(?:11|18)(?:\d{3})*(?!\d)|h\d|mi\d|fp|rtx|l4|l40)", re.IGNORECASE)


def a(word: object) -> str:
    """`word` with its indefinite article: `a(80)` -> "an 80", `a("h100")` -> "an h100", `a(7)` -> "a 7"."""
    text = str(word)
    return f"{'an' if _AN.match(text) else 'a'} {text}"
