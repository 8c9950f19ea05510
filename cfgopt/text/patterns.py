"""A regular expression compiled when first used (`lazy`), for module-level patterns on the lint path.

Compiling a pattern costs 0.1-1 ms (`re` parses and optimises it in Python); at import time every module of a
run pays for every pattern it defines, used or not (a lint of one YAML imports about 60 rule modules). A
`LazyPattern` compiles on its first match, search or substitution, with the same answer `re.compile` gives
(tests/lint/test_lazy_startup.py)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class LazyPattern:
    """`re.compile(pattern, flags)`, compiled at its first use; the methods a compiled pattern has."""

    __slots__ = ("_compiled", "flags", "pattern")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.pattern, self.flags = pattern, flags
        self._compiled: re.Pattern[str] | None = None

    @property
    def compiled(self) -> re.Pattern[str]:
        if self._compiled is None:
            self._compiled = re.compile(self.pattern, self.flags)
        return self._compiled

    def match(self, string: str, *bounds: int) -> re.Match[str] | None:
        return self.compiled.match(string, *bounds)

    def fullmatch(self, string: str, *bounds: int) -> re.Match[str] | None:
        return self.compiled.fullmatch(string, *bounds)

    def search(self, string: str, *bounds: int) -> re.Match[str] | None:
        return self.compiled.search(string, *bounds)

    def finditer(self, string: str, *bounds: int) -> Iterator[re.Match[str]]:
        return self.compiled.finditer(string, *bounds)

    def findall(self, string: str, *bounds: int) -> list[Any]:
        return self.compiled.findall(string, *bounds)

    def split(self, string: str, maxsplit: int = 0) -> list[str | Any]:
        return self.compiled.split(string, maxsplit)

    def sub(self, repl: str | Callable[[re.Match[str]], str], string: str, count: int = 0) -> str:
        return self.compiled.sub(repl, string, count)

    def subn(self, repl: str | Callable[[re.Match[str]], str], string: str, count: int = 0) -> tuple[str, int]:
        return self.compiled.subn(repl, string, count)

    def __repr__(self) -> str:
        return f"lazy({self.pattern!r}, {self.flags!r})"


def lazy(pattern: str, flags: int = 0) -> LazyPattern:
    """A pattern compiled when first used (module-level patterns of the lint path)."""
    return LazyPattern(pattern, flags)
