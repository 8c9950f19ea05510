"""What runs a command without being it, skipped to reach the program a command runs: `VAR=value` assignments,
reserved words (`do`, `then`, `!`), `nohup`, `time -p`, `env -u X A=1`, `nice -n 5`, `timeout 1h`, `sudo -E`,
`coproc`; and the program's name as written (`program_name`). Shared by the environment, the launch shapes and the
function reader.
"""

from __future__ import annotations

import re

from cfgopt.loaders.shell import Word

ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\+?=")
VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def program_name(words: list[Word]) -> str:
    """The command's program name as written ("" when it is an expansion)."""
    k = skip_prefixes(words, 0, {})
    return words[k].text if k < len(words) and words[k].literal else ""


def skip_prefixes(words: list[Word], k: int, env: dict[str, Word]) -> int:
    """The index of the word naming the program, past reserved words, `VAR=value` assignments, a one-line
    function's head (`function f {`), `coproc [NAME]` and the commands that run another one (`nohup`, `time -p`,
    `env -u X A=1`, `nice -n 5`, `timeout 1h`, `sudo -E`)."""
    while k < len(words):
        word = words[k]
        text = word.text
        if ASSIGNMENT.match(text):
            env[text.partition("=")[0]] = word
            k += 1
        elif not word.literal:
            return k
        elif text in ("do", "then", "else", "elif", "if", "while", "until", "!", "{", "nohup", "builtin"):
            k += 1
        elif text in ("time", "command", "exec", "env", "nice", "timeout", "stdbuf", "sudo"):
            k = _skip_wrapper_options(words, k + 1, text)
        elif text == "function":  # `function f { ...; }` on one line: the body's first command follows
            k += 2
        elif text == "coproc":  # `coproc CMD ...`, `coproc NAME { CMD ...; }`
            named = k + 2 < len(words) and words[k + 2].text == "{" and VARIABLE_NAME.fullmatch(words[k + 1].text)
            k += 2 if named else 1
        else:
            return k
    return k


# Options of the wrappers that take a separate value (`env -u NAME`, `nice -n 5`, `sudo -u user`).
_WRAPPER_VALUES = {
    "env": ("-u", "--unset", "-C", "--chdir", "-S"),
    "exec": ("-a",),
    "nice": ("-n", "--adjustment"),
    "timeout": ("-s", "--signal", "-k", "--kill-after"),
    "stdbuf": ("-i", "-o", "-e"),
    "sudo": ("-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U"),
}


def _skip_wrapper_options(words: list[Word], k: int, wrapper: str) -> int:
    """Skip a wrapper's options (and `timeout`'s duration); the program it runs comes next."""
    takes_value = _WRAPPER_VALUES.get(wrapper, ())
    while k < len(words):
        text = words[k].text
        if not (text.startswith("-") and (len(text) > 1 or wrapper == "env")):
            break
        k += 2 if text in takes_value else 1
    if wrapper == "timeout" and k < len(words):
        k += 1  # the duration
    return k
