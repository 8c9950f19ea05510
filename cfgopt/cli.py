"""The command line: the parser and the dispatch. Each subcommand is one module of `cfgopt.commands` with
`add_arguments(parser)` and `run(args) -> int`, imported only when it is the one being run (or for
`cfgopt --help`). A short run's words are read without argparse where `cfgopt.commands.fast_args` is certain of
argparse's answer; else argparse parses them, so help and every usage error are argparse's.

Exit codes (as ruff): 0 nothing at or above --fail-on, 1 findings, 2 a usage error or a file that could
not be read or parsed. Imports stay light: PyYAML, argparse only when a parser is built, and pydantic only when
a DeepSpeed file is read.
"""

from __future__ import annotations

import gc
import os
import sys

from cfgopt.commands import UsageError
from cfgopt.version import __version__

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from types import ModuleType


# name -> help; the options and the run are in cfgopt/commands/<name>.py
SUBCOMMANDS = {
    "lint": "report problems",
    "fix": "fix what can be fixed: print a diff, or --write it",
    "verify": "run the real trainer for a few steps, original vs fixed",
    "estimate": "peak memory per GPU of a training config, largest micro-batch",
    "tune": "find the fastest config that fits, by memory-pruned short runs",
    "doctor": "check this node's environment (packages, builds, GPUs, variables) against training configs",
    "schema": "JSON Schema files for editors: `cfgopt schema export`",
    "rules": "list all rules",
    "rule": "explain one rule",
    "server": "language server for editors (LSP over stdio; docs/editor.md)",
}


def _command(name: str) -> ModuleType:
    return __import__(f"cfgopt.commands.{name}", fromlist=["_"])  # importlib.import_module, without its import


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser. `only`: the subcommand named first on the command line, whose parser alone is built (as
    argparse would build it under `cfgopt`, with the same prog and usage); it parses the words after the
    subcommand's name. Building every subcommand's parser costs a lint run more than it spends linting a
    file (argparse formats help and looks up translations for each). None: the whole tree (`cfgopt --help`)."""
    from cfgopt.commands.argparser import Parser

    if only is not None:
        parser = Parser(prog=f"cfgopt {only}")
        _command(only).add_arguments(parser)
        parser.set_defaults(command=only)
        return parser
    parser = Parser(prog="cfgopt", description="Lint and fix LLaMA-Factory YAML and DeepSpeed JSON.")
    parser.add_argument("-V", "--version", action="version", version=f"cfgopt {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for name, help_text in SUBCOMMANDS.items():
        _command(name).add_arguments(sub.add_parser(name, help=help_text))
    parser.subcommands = sub.choices  # type: ignore[attr-defined]  # for the subcommand's usage on errors
    return parser


def _subcommand(words: list[str]) -> str | None:
    """The subcommand when the command line starts with one (`cfgopt lint ...`); else None (`cfgopt --help`)."""
    return words[0] if words and words[0] in SUBCOMMANDS else None


def _usage_parser(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The parser whose usage an error shows: the subcommand's (as ruff), `schema export`'s for that one."""
    sub = parser if parser.prog != "cfgopt" else parser.subcommands[args.command]  # type: ignore[attr-defined]
    if getattr(args, "schema_command", None):
        sub = sub.subcommands[args.schema_command]
    return sub


# Runs that end in well under a second: the cyclic garbage collector is off for them (their cycles die with the
# process), a twentieth of a seed lint's time (bench/results.md); a long run (`--watch`, server, tune) keeps it.
_SHORT_RUNS = frozenset({"lint", "fix", "rules", "rule", "schema"})


def main(argv: list[str] | None = None) -> int:
    """The command line; `argv` None: the process's own (the console script, `python -m cfgopt`), which ends
    with this run."""
    words = sys.argv[1:] if argv is None else list(argv)
    short = gc.isenabled() and _subcommand(words) in _SHORT_RUNS and "--watch" not in words
    if short:
        gc.disable()
    try:
        code = _main(words)
    finally:
        if short:
            if argv is None:  # the process exits next: its last collection skips what the run built (a tenth)
                gc.freeze()
            gc.enable()
    if short and argv is None:
        _exit_now(code)
    return code


def _exit_now(code: int) -> None:
    """End a short run of the process's own command line here, once its output is flushed: tearing down the
    hundred and more modules it loaded costs a seed lint about 3% of its time (bench/results.md) and does
    nothing a finished run needs (cfgopt registers no exit handler; every file it writes is closed by then)."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (BrokenPipeError, ValueError):  # a closed pipe or stream: the interpreter's own exit reports it
        return
    os._exit(code)


def _read_fast(only: str, words: list[str]) -> argparse.Namespace | None:
    """The subcommand's words read without argparse (`cfgopt.commands.fast_args`), or None: argparse reads them."""
    from cfgopt.commands import fast_args

    return fast_args.parse(only, words)  # type: ignore[return-value]  # the same attributes as argparse's


def _main(words: list[str]) -> int:
    from cfgopt.knowledge.versions import VersionError  # imported here, after the collector is off
    from cfgopt.lint.project_config import ConfigError

    if not words or words == ["schema"]:  # as ruff: a bare call prints the help (on stderr, exit 2)
        build_parser(words[0] if words else None).print_help(sys.stderr)
        return 2
    only = _subcommand(words)
    args = _read_fast(only, words[1:]) if only else None
    parser = None
    if args is None:
        parser = build_parser(only)
        args, unknown = parser.parse_known_args(words[1:] if only else words)
        if unknown:
            _usage_parser(parser, args).error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        return _command(args.command).run(args)
    except UsageError as exc:
        _usage_parser(parser or build_parser(only), args).error(str(exc))
        raise AssertionError("unreachable: argparse's error() exits") from None
    except (VersionError, ConfigError) as exc:  # no snapshot for a release, a bad project config: usage errors
        sys.stderr.write(f"cfgopt: error: {exc}\n")
        return 2
    except SystemExit as exc:  # SystemExit("message") from a command: it could not run (exit 2, not Python's 1)
        if isinstance(exc.code, str):
            sys.stderr.write(exc.code.rstrip("\n") + "\n")
            return 2
        raise
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM / SIGHUP where a command turned them into one
        from cfgopt.text import termination

        sys.stderr.write(f"cfgopt: {termination.describe(exc)}\n")
        return termination.exit_code(exc)
    except BrokenPipeError:
        return 0
