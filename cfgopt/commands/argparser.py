"""The argparse classes cfgopt's command line is built with (`cfgopt.cli.build_parser`): the one definition of
every subcommand's options, their help and their errors. Imported only when a parser is built: a short run whose
words `cfgopt.commands.fast_args` reads with certainty never imports argparse (nor gettext and locale, which it
loads), about a third of what a seed lint spends before linting."""

from __future__ import annotations

import argparse
import os
import sys

from cfgopt.text.user_text import integer


def _terminal_columns() -> int:
    """`shutil.get_terminal_size().columns` without importing shutil (and the compression modules it loads),
    which argparse's help formatter would do on every `add_argument`: $COLUMNS, else the terminal, else 80."""
    columns = integer(os.environ.get("COLUMNS", ""), strip=True)
    if columns:
        return min(columns, 10_000)
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns or 80  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):
        return 80


class HelpFormatter(argparse.HelpFormatter):
    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=_terminal_columns() - 2)  # argparse's own margin


class Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        kwargs.setdefault("allow_abbrev", False)  # `lint --fix LF` is no `--fixable LF`: an option is named in full
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # argparse's own exit code is 2 too; keep the message short
        self.print_usage(sys.stderr)
        sys.stderr.write(f"cfgopt: error: {message}\n")
        raise SystemExit(2)
