"""The shell functions a script defines (`f() { ...; }`, `function f { ... }`): the commands of each body, the
headers that run nothing, and the names a body declares `local`; the command reader reads a body at each call.
"""

from __future__ import annotations

import re

from cfgopt.loaders import shell
from cfgopt.loaders.launch.prefixes import VARIABLE_NAME, skip_prefixes
from cfgopt.loaders.shell import Word

_FUNCTION_HEADER = re.compile(r"[ \t]*\([ \t]*\)")


def function_bodies(text: str, commands: list[shell.Command]) -> tuple[dict[str, tuple[int, int]], set[int]]:
    """Each function of the script (`f() { ...; }`, `function f { ... }`): the command indexes of its body, from
    the command that opens its `{` to the one that closes it (`f() ( ... )` is not followed); and the headers
    (`f()` alone), which run nothing. A function written twice: the last one, as bash defines it again."""
    found: dict[str, tuple[int, int]] = {}
    headers: set[int] = set()
    i = 0
    while i < len(commands):
        name, opens = _defined_function(text, commands[i])
        if name is None:
            i += 1
            continue
        if not opens:
            headers.add(i)
            i += 1
            if i >= len(commands) or not _opens_group(commands[i].words[0]):
                continue
        end, level = i + 1, 1
        while end < len(commands) and level > 0:
            first = commands[end].words[0]
            level += _opens_group(first) - (first.literal and first.text == "}")
            end += 1
        found[name] = (i, end)
        i = end
    return found, headers


def _opens_group(word: Word) -> bool:
    return word.literal and word.text == "{"


def _defined_function(text: str, command: shell.Command) -> tuple[str | None, bool]:
    """The name a command defines a function under (`f()`, `function f`, `function f {`), or None; and whether
    the command itself opens the body (`function f {`)."""
    words = command.words
    if command.depth:
        return None, False
    if words[0].literal and words[0].text == "function" and len(words) > 1:
        return words[1].text, len(words) > 2 and _opens_group(words[2])
    if len(words) == 1 and words[0].literal and _FUNCTION_HEADER.match(text, command.end):
        return words[0].text, False
    return None, False


def local_names(body: list[shell.Command]) -> set[str]:
    """The names a body declares `local` (or `declare` / `typeset`, local inside a function)."""
    names = set()
    for command in body:
        words = command.words[skip_prefixes(command.words, 0, {}) :]
        if words and words[0].text in ("local", "declare", "typeset"):
            names.update(w.text.partition("=")[0].rstrip("+") for w in words[1:] if VARIABLE_NAME.match(w.text))
    return names
