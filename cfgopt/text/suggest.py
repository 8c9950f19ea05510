"""Did-you-mean: the closest known name, or nothing when no name is close enough to be a typo."""

from __future__ import annotations

from collections.abc import Iterable


def closest(word: str, candidates: Iterable[str], cutoff: float = 0.8) -> str | None:
    import difflib  # only when a name is unknown: most runs never ask

    pool = list(candidates)
    match = difflib.get_close_matches(word, pool, n=1, cutoff=cutoff)
    if match:
        return match[0]
    low = {c.lower(): c for c in pool}
    return low.get(word.lower())
