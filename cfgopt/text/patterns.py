"""A regular expression compiled when first used (`lazy`), for module-level patterns on the lint path.

Compiling a pattern costs 0.1-1 ms (`re` parses and optimises it in Python); at import time every module of a
run pays for every pattern it defines, used or not (a lint of one YAML imports about 60 rule modules). A
`LazyPattern` compiles on its first match, search or substitution, with the same answer `re.compile` gives
(tests/lint/test_lazy_startup.py).

`needs`: literals of which every match of the pattern holds one (`lazy(r"\\$\\{[^}]*\\}", needs=("${",))`). A
text holding none of them has no match, so `match`, `fullmatch`, `search`, `finditer` and `findall` answer it
without compiling: a pattern that names model families or version markers is then compiled only for a text that
could match (tests/text/test_patterns.py checks every `needs` of the package against its pattern). Under
`re.IGNORECASE` the literals are lower-case ASCII and the shortcut is taken for ASCII texts only (where ignoring
case is comparing `str.lower()`; other letters fold in ways `str.lower` does not). For short texts: the check reads
the whole text, whatever bounds a call gives."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class LazyPattern:
    """`re.compile(pattern, flags)`, compiled at its first use; the methods a compiled pattern has."""

    __slots__ = ("_compiled", "flags", "needs", "pattern")

    def __init__(self, pattern: str, flags: int = 0, needs: tuple[str, ...] = ()) -> None:
        if flags & re.IGNORECASE and not all(n.isascii() and n == n.lower() for n in needs):
            raise ValueError(f"needs of a pattern that ignores case: lower-case ASCII only ({needs!r})")
        self.pattern, self.flags, self.needs = pattern, flags, needs
        self._compiled: re.Pattern[str] | None = None

    @property
    def compiled(self) -> re.Pattern[str]:
        if self._compiled is None:
            self._compiled = re.compile(self.pattern, self.flags)
        return self._compiled

    def cannot_match(self, string: str) -> bool:
        """Does `string` hold none of the literals every match needs (so no match, without compiling)?"""
        if not self.needs:
            return False
        if self.flags & re.IGNORECASE:
            if not string.isascii():
                return False
            string = string.lower()
        return not any(literal in string for literal in self.needs)

    def match(self, string: str, *bounds: int) -> re.Match[str] | None:
        return None if self.cannot_match(string) else self.compiled.match(string, *bounds)

    def fullmatch(self, string: str, *bounds: int) -> re.Match[str] | None:
        return None if self.cannot_match(string) else self.compiled.fullmatch(string, *bounds)

    def search(self, string: str, *bounds: int) -> re.Match[str] | None:
        return None if self.cannot_match(string) else self.compiled.search(string, *bounds)

    def finditer(self, string: str, *bounds: int) -> Iterator[re.Match[str]]:
        return iter(()) if self.cannot_match(string) else self.compiled.finditer(string, *bounds)

    def findall(self, string: str, *bounds: int) -> list[Any]:
        return [] if self.cannot_match(string) else self.compiled.findall(string, *bounds)

    def split(self, string: str, maxsplit: int = 0) -> list[str | Any]:
        return self.compiled.split(string, maxsplit)

    def sub(self, repl: str | Callable[[re.Match[str]], str], string: str, count: int = 0) -> str:
        return self.compiled.sub(repl, string, count)

    def subn(self, repl: str | Callable[[re.Match[str]], str], string: str, count: int = 0) -> tuple[str, int]:
        return self.compiled.subn(repl, string, count)

    def __repr__(self) -> str:
        return f"lazy({self.pattern!r}, {self.flags!r})"


def lazy(pattern: str, flags: int = 0, needs: tuple[str, ...] = ()) -> LazyPattern:
    """A pattern compiled when first used (module-level patterns of the lint path); `needs`: literals every match
    holds one of (a text without them is answered without compiling)."""
    return LazyPattern(pattern, flags, needs)
