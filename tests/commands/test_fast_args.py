"""`cfgopt.commands.fast_args` reads a short run's words without argparse: its answer is argparse's namespace
(the same attributes, equal values of the same types) or None, and None wherever argparse stops with help or a
usage error. The words are built from argparse's own parsers (every option with valid, invalid and odd values,
in both spellings, repeated, around positional words), not from the generated table the reader uses; the table
is checked against its generator; and a seed lint imports no argparse."""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import itertools
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from repo_paths import ROOT
from sampling import examples

from cfgopt.cli import build_parser, main
from cfgopt.commands import fast_args
from cfgopt.commands.argparser import Parser
from cfgopt.commands.option_table import COMMANDS

sys.path.insert(0, str(ROOT / "scripts"))
from gen_option_table import SUBCOMMANDS, TABLE, render, table_of

SEED = "fixtures/seed/llama3_lora_sft.yaml"
# values for every option that takes one: valid for some option, refused by others, and words argparse reads
# as options, negative numbers or nothing
VALUES = [
    *("x.yaml", "h100", "none", "mi300x", "8", "1", "0", "-1", "-.5", "1e3", "999999"),
    *("LF", "LF001,DS", "ALL", "LF9999", "json", "text", "concise", "xml", "error", "info", "a=1", "0.9.5"),
    *("", " ", "-", "--", "-x", "a b", "-q", "--quiet", "--target", "=", "LF003"),
]
# words that are no option of any short run, or only the start of one
ODD_WORDS = ["-h", "--help", "--tar", "--fix", "--format=", "-qq", "-qh", "-Q", "---", "--no-such", "-1", "-x y", "@a"]
POSITIONALS = ["x.yaml", "-", "cfg dir", "LF003", "a=b", ""]


@functools.cache
def _parser(command: str):
    return build_parser(command)


def _by_argparse(parser: argparse.ArgumentParser, words: list[str]) -> dict | None:
    """vars() of argparse's namespace for `cfgopt COMMAND WORDS...` as `cfgopt.cli` parses them, or None where it
    stops (help, a usage error, words left over)."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            namespace, unknown = parser.parse_known_args(words)
        except SystemExit:
            return None
    return None if unknown else vars(namespace)


def _check(command: str, words: list[str], parser: argparse.ArgumentParser | None = None) -> bool:
    """The reader gives argparse's namespace or None (always None where argparse stops); True: it answered."""
    fast = fast_args.parse(command, words)
    if fast is None:
        return False
    expected = _by_argparse(parser or _parser(command), words)
    assert expected is not None, f"argparse stops on {words}, the reader answers {fast}"
    assert vars(fast) == expected, words
    assert {k: type(v) for k, v in vars(fast).items()} == {k: type(v) for k, v in expected.items()}, words
    return True


def _options(parser: argparse.ArgumentParser) -> list[tuple[str, bool]]:
    """(option string, takes a value) of every option of an argparse parser."""
    return [
        (option, action.nargs is None)
        for action in parser._actions
        for option in action.option_strings
        if action.dest != "help"
    ]


def _units(command: str, parser: argparse.ArgumentParser | None = None) -> list[list[str]]:
    """Each option with each value, as two words and as `--name=value`; each flag alone and given a value."""
    units: list[list[str]] = []
    for option, takes_value in _options(parser or _parser(command)):
        if takes_value:
            units += [[option, value] for value in VALUES] + [[f"{option}={value}"] for value in VALUES]
        else:
            units += [[option], [f"{option}=1"], [f"{option}="]]
    return units + [[word] for word in ODD_WORDS]


@pytest.mark.parametrize("command", ["lint", "fix"])
def test_every_option_and_value_reads_as_argparse_reads_it(command: str) -> None:
    """Each option and value alone, before, after and between positional words, and twice."""
    answered: set[str] = set()
    for unit in _units(command):
        shapes = [unit, ["x.yaml", *unit], [*unit, "x.yaml", "-"], ["a", *unit, "b"], [*unit, *unit], [*unit, "--"]]
        for words in shapes:
            if _check(command, words):
                answered.add(unit[0].partition("=")[0])
    assert answered >= {option for option, _ in _options(_parser(command))}  # the reader reads every option


def _one_unit_each(command: str) -> list[list[str]]:
    """For each option, the first of its units the reader answers for (a valid value)."""
    units: dict[str, list[str]] = {}
    for unit in _units(command):
        if fast_args.parse(command, unit) is not None:
            units.setdefault(unit[0].partition("=")[0], unit)
    return list(units.values())


@pytest.mark.parametrize("command", ["lint", "fix"])
def test_pairs_of_options_read_as_argparse_reads_them(command: str) -> None:
    """Every two options (a valid value each), both orders, around the paths: repeats, and fix's --write/--diff."""
    for first, second in itertools.product(_one_unit_each(command), repeat=2):
        _check(command, [*first, "x.yaml", *second])
        _check(command, ["-", *first, *second])


@pytest.mark.parametrize("command", ["rules", "rule"])
def test_the_other_short_runs_read_as_argparse_reads_them(command: str) -> None:
    units = _units(command)
    for unit, positional in itertools.product([[], *units], [[], *([p] for p in POSITIONALS), ["LF003", "LF001"]]):
        _check(command, [*unit, *positional])
        _check(command, [*positional, *unit])


@st.composite
def _command_lines(draw) -> tuple[str, list[str]]:
    command = draw(st.sampled_from(SUBCOMMANDS))
    pieces = st.one_of(
        st.sampled_from(_units(command)),
        st.sampled_from(POSITIONALS).map(lambda word: [word]),
        st.sampled_from(VALUES).map(lambda word: [word]),
    )
    return command, [word for piece in draw(st.lists(pieces, max_size=7)) for word in piece]


@settings(max_examples=examples(2000, 300), deadline=None, suppress_health_check=list(HealthCheck))
@given(_command_lines())
def test_any_command_line_reads_as_argparse_reads_it(command_line: tuple[str, list[str]]) -> None:
    _check(*command_line)


def _synthetic_parsers() -> list[tuple[argparse.ArgumentParser, list[str]]]:
    """Parsers with what the reader reads and cfgopt's short runs do not use today: a string default its type
    converts, count, store_false, store_const, append without a default, a required option, an option without a
    default (SUPPRESS), a required positional, a `*` positional without a default, an exclusive group of options
    that take values."""
    first = Parser(prog="cfgopt synthetic")
    first.add_argument("item")
    first.set_defaults(level=9)  # the option's own default, set after, is what argparse gives
    first.add_argument("--level", type=int, default="3")
    first.add_argument("-v", "--verbose", action="count")
    first.add_argument("--no-color", dest="color", action="store_false")
    first.add_argument("--fast", dest="mode", action="store_const", const="fast", default="slow")
    first.add_argument("--tag", action="append")
    first.add_argument("--must", required=True, choices=["a", "b"])
    first.add_argument("--maybe", default=argparse.SUPPRESS)  # no attribute unless given
    second = Parser(prog="cfgopt synthetic")
    second.add_argument("items", nargs="*")
    group = second.add_mutually_exclusive_group()
    group.add_argument("--name")
    group.add_argument("--other", type=int, default=7)
    second.set_defaults(command="synthetic", level=5)
    return [
        (first, ["x", "--must", "b", "-v", "-v", "--tag", "t", "--fast", "--tag", "u", "--no-color", "--maybe", "m"]),
        (second, ["a", "b", "--other", "3"]),
    ]


@pytest.mark.parametrize(("parser", "answered"), _synthetic_parsers(), ids=["first", "second"])
def test_what_no_short_run_uses_yet_reads_as_argparse_reads_it(
    parser: argparse.ArgumentParser, answered: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fast_args, "COMMANDS", {"synthetic": table_of(parser, "synthetic")})
    units = [[], *_units("synthetic", parser)]
    for first, second in itertools.product(units, [[], ["--must", "a"], ["-v"], ["--name", "n"], ["--level", "2"]]):
        for words in ([*first, *second], ["x", *first, *second], [*first, "x", *second, "y"]):
            _check("synthetic", words, parser)
    assert _check("synthetic", answered, parser)


def test_common_command_lines_are_read_without_argparse() -> None:
    """What pre-commit, CI and people type is answered by the reader (no argparse), as argparse answers it."""
    for command, words in [
        ("lint", [SEED]),
        ("lint", []),
        ("lint", ["--target", "mi300x", "--gpus", "8", SEED, "fixtures/seed"]),
        ("lint", ["--format=json", "--select", "LF,DS", "--ignore", "PF", "-q", "."]),
        ("lint", ["--config", "target='h100'", "--config", "fail-on='error'", "--isolated", SEED]),
        ("lint", ["-", "--stdin-filename", "cfg.yaml"]),
        ("fix", ["--write", "--unsafe-fixes", "--exit-zero", SEED]),
        ("fix", ["--diff", "--output-format", "json", SEED]),
        ("rules", ["--format", "markdown"]),
        ("rule", ["LF003"]),
        ("rule", ["--format", "json", "LF003"]),
    ]:
        assert _check(command, words), (command, words)


def test_the_reader_leaves_other_subcommands_to_argparse() -> None:
    assert fast_args.parse("tune", [SEED]) is None
    assert fast_args.parse("schema", ["export"]) is None


def test_the_option_table_is_current() -> None:
    assert TABLE.read_text(encoding="utf-8") == render(), "stale: run python scripts/gen_option_table.py"
    assert set(COMMANDS) == set(SUBCOMMANDS)


def test_a_seed_lint_imports_no_argparse() -> None:
    """argparse (with gettext and locale, which it loads) is imported only when a parser is built."""
    code = (
        "import sys; from cfgopt.cli import main; code = main(['lint', 'fixtures/seed/llama3_lora_sft.yaml']); "
        "print(code, *(m for m in ('argparse', 'gettext', 'locale') if m in sys.modules), file=sys.stderr)"
    )
    err = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False).stderr
    assert err.splitlines()[-1] == "1", err  # findings, and no argparse


def test_cfgopt_output_format_is_read_when_lint_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """$CFGOPT_OUTPUT_FORMAT is `--format`'s default; `--format` wins over it. Read by the run, not the parser,
    so the generated table is the same in every environment."""
    monkeypatch.setenv("CFGOPT_OUTPUT_FORMAT", "json")
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main(["lint", "--isolated", SEED]) == 1
    assert out.getvalue().startswith("{")
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main(["lint", "--isolated", "--format", "concise", SEED]) == 1
    assert not out.getvalue().startswith("{")
