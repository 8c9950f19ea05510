"""The words of a short run (`cfgopt lint cfg.yaml`) read without argparse, or None.

Importing argparse (with gettext and locale) and building a subcommand's parser cost a seed lint about 3 ms of its
68, whole process (bench/results.md). argparse stays the one definition of the command line:
`scripts/gen_option_table.py` writes each short run's actions, as argparse holds them, to
`cfgopt.commands.option_table`, and this reader reads the words after the subcommand's name with that table. It
answers only where argparse's answer is certain and the same on every Python cfgopt supports: the namespace
argparse would give (the same attributes, equal values), or None for anything else, and `cfgopt.cli` then parses
with argparse as before, so help, every error and its message stay argparse's. None for: `-h`/`--help`; `--`; a
word starting with `-` that is not an option named in full (an abbreviation, `-qq`, a negative number, `-1.5`; `-`
alone is stdin, a path); a value starting with `-` or missing; `-x=VALUE`, and `--name=` with nothing after it; a
value its type refuses or that is not among the choices; two options of a mutually exclusive group; positional
words on both sides of an option (argparse leaves the second part over); a required positional or option missing.
tests/commands/test_fast_args.py compares it with argparse over many command lines."""

from __future__ import annotations

from types import SimpleNamespace

from cfgopt.commands.option_table import COMMANDS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

SUPPRESS = "==SUPPRESS=="  # argparse.SUPPRESS: the action sets no attribute (help)
# (what each action does with the option's word, the value argparse's action stores): the actions read here
_NO_VALUE = frozenset({"store_true", "store_false", "store_const", "count"})
_ONE_VALUE = frozenset({"store", "append"})
_READ = _NO_VALUE | _ONE_VALUE


class _Refused(Exception):
    """A word the reader does not answer for with certainty: argparse reads the command line instead."""


def parse(command: str, words: list[str]) -> SimpleNamespace | None:
    """The namespace argparse gives for `cfgopt COMMAND WORDS...`, or None where argparse must read them."""
    table = COMMANDS.get(command)
    if table is None:
        return None
    try:
        return SimpleNamespace(**_read(table, words))
    except _Refused:
        return None


def _read(table: tuple, words: list[str]) -> dict[str, object]:
    parser_defaults, actions, exclusive = table
    namespace = _defaults(actions, parser_defaults)
    by_option = {option: action for action in actions for option in action[0]}
    given: set[str] = set()  # the dests of the options given
    positional: list[str] = []
    closed = False  # an option came after positional words: argparse leaves any later ones over (an error)
    index = 0
    while index < len(words):
        word = words[index]
        index += 1
        if not word.startswith("-") or word == "-":
            if closed:
                raise _Refused
            positional.append(word)
            continue
        closed = bool(positional)
        name, equals, value = word.partition("=") if word.startswith("--") else (word, "", "")
        action = by_option.get(name)
        if action is None or action[2] not in _READ or (equals and action[2] not in _ONE_VALUE):
            raise _Refused  # help, an unknown word or abbreviation, a flag given a value
        if action[2] in _ONE_VALUE and not equals:
            if index == len(words):
                raise _Refused  # the value is missing
            value, index = words[index], index + 1
        if action[2] in _ONE_VALUE and ((equals and not value) or value.startswith("-")):
            raise _Refused  # `--name=` alone, or a value argparse may read as an option or a negative number
        _take(action, value, namespace)
        given.add(action[1])
    _check_given(actions, exclusive, given)
    _take_positionals(actions, positional, namespace)
    given.update(action[1] for action in actions if not action[0])  # argparse has seen them, with no words too
    _convert_string_defaults(actions, given, namespace)
    return namespace


def _defaults(actions: tuple, parser_defaults: dict[str, object]) -> dict[str, object]:
    """What argparse's namespace holds before a word is read: each action's default (a fresh copy of a list, which
    argparse builds anew with each parser), then the parser's own (`set_defaults`) for the dests left."""
    namespace: dict[str, object] = {}
    for _, dest, _, _, _, default, _, _, _ in actions:
        if dest != SUPPRESS and default != SUPPRESS and dest not in namespace:
            namespace[dest] = list(default) if isinstance(default, list) else default
    for dest, default in parser_defaults.items():
        namespace.setdefault(dest, default)
    return namespace


def _take(action: tuple, word: str, namespace: dict[str, object]) -> None:
    """One option and its word, as argparse's action of that name stores it."""
    _, dest, kind, _, const, _, choices, type_name, _ = action
    if kind == "store":
        namespace[dest] = _value(word, type_name, choices)
    elif kind == "append":  # argparse appends to a copy of what is there (the default is never changed)
        namespace[dest] = [*(namespace.get(dest) or ()), _value(word, type_name, choices)]
    elif kind == "count":  # from the default, or 0 where there is none
        count = namespace.get(dest)
        namespace[dest] = (0 if count is None else count) + 1
    else:  # store_true, store_false, store_const
        namespace[dest] = const


def _take_positionals(actions: tuple, words: list[str], namespace: dict[str, object]) -> None:
    """The positional words for the parser's one positional (the generator writes no more): `*` takes them all
    (none: the default itself, as argparse keeps it), a plain one exactly one."""
    positionals = [action for action in actions if not action[0]]
    if not positionals:
        if words:
            raise _Refused  # left over: argparse's "unrecognized arguments"
        return
    (action,) = positionals
    _, dest, _, nargs, _, default, choices, type_name, _ = action
    if nargs == "*":
        if not words and choices is None:
            namespace[dest] = namespace[dest] if default is not None else []
            return
        if not words:
            raise _Refused
        namespace[dest] = [_value(word, type_name, choices) for word in words]
    elif nargs is None and len(words) == 1:
        namespace[dest] = _value(words[0], type_name, choices)
    else:
        raise _Refused


def _check_given(actions: tuple, exclusive: tuple, given: set[str]) -> None:
    """argparse's errors after reading: a required option missing, two of a mutually exclusive group."""
    if any(action[8] and action[0] and action[1] not in given for action in actions):
        raise _Refused
    if any(len(given.intersection(group)) > 1 for group in exclusive):
        raise _Refused


def _convert_string_defaults(actions: tuple, given: set[str], namespace: dict[str, object]) -> None:
    """argparse passes a default written as a string through the option's type once nothing set it (`--format`'s
    "full" through `_format_name`); not through its choices."""
    for _, dest, _, _, _, default, _, type_name, _ in actions:
        if isinstance(default, str) and default != SUPPRESS and dest not in given and namespace.get(dest) is default:
            namespace[dest] = _value(default, type_name, None)


def _value(word: str, type_name: str | None, choices: tuple | None) -> object:
    """`word` through the option's type and choices, as argparse's `_get_value` and `_check_value`; any error
    (argparse's usage error, or an exception it would let through) is argparse's to report."""
    try:
        value = word if type_name is None else _converter(type_name)(word)
    except Exception:  # noqa: BLE001 - whatever the type raised, argparse raises or reports it again
        raise _Refused from None
    if choices is not None and value not in choices:
        raise _Refused
    return value


def _converter(type_name: str) -> Callable[[str], object]:
    """The type function a table names as "module:name" (`cfgopt.argtypes:gpu_count`, `pathlib:Path`)."""
    module, _, name = type_name.partition(":")
    return getattr(__import__(module, fromlist=["_"]), name)
