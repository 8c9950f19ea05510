"""`cfgopt SUB ...` builds the parser of SUB alone (`cli.build_parser(only)`), not the whole tree: whatever argparse
prints (help, usage, errors) and the exit code must be what the whole tree gives for the same words. Each case runs
`main` twice: as it is, and with the subcommand never built alone (`cli._subcommand` answering None, as for
`cfgopt --help`), so the whole tree parses every word. A short run read without argparse (`cfgopt.commands.fast_args`)
prints what argparse's reading of its words prints."""

from __future__ import annotations

import contextlib
import io

import pytest

from cfgopt import cli
from cfgopt.cli import SUBCOMMANDS, main
from cfgopt.commands import fast_args

SEED = "fixtures/seed/llama3_lora_sft.yaml"
TARGETED = ("lint", "fix", "estimate", "verify", "tune")  # the subcommands with --target and --gpus

CASES = [
    *([name, "--help"] for name in SUBCOMMANDS),
    *([name, "-h"] for name in SUBCOMMANDS),
    *([name, "--no-such-option"] for name in SUBCOMMANDS),
    # an option is named in full (`allow_abbrev=False`): `--tar` is refused, not read as `--target`
    *([name, "--tar", "h100", SEED] for name in TARGETED),
    *([name, "--target", "no-such-gpu", SEED] for name in TARGETED),  # a bad choice
    *([name, "--gpus"] for name in TARGETED),  # an option missing its value
    *([name, "--gpus", "0", SEED] for name in TARGETED),  # a value its type refuses
    ["lint", "--format", "xml", SEED],
    ["lint", "--select", "LF9999", SEED],
    ["lint", "--stdin-filename", "x.yaml", SEED],  # a usage error found after parsing: the subcommand's usage
    ["fix", "--write", "--diff", SEED],  # mutually exclusive
    ["rule"],  # a missing positional
    ["schema"],  # the bare subcommand prints its help
    ["schema", "export", "--help"],
    ["schema", "no-such-action"],
    # the whole tree either way: no subcommand named first
    [],
    ["--help"],
    ["help"],
    ["no-such-command"],
    ["-V"],
    ["--tar", "h100", "lint"],
]


def _outcome(argv: list[str]) -> tuple[int | str | None, str, str]:
    """(exit code, stdout, stderr) of `cfgopt ARGV`; argparse's help and errors exit through SystemExit."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code: int | str | None = main(argv)
        except SystemExit as exc:
            code = exc.code
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("argv", CASES, ids=" ".join)
def test_the_subcommand_parser_alone_prints_what_the_whole_tree_prints(
    argv: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "100")  # one width for both runs (help is wrapped to the terminal)
    alone = _outcome(argv)
    monkeypatch.setattr(cli, "_subcommand", lambda words: None)
    whole = _outcome(argv)
    assert alone == whole
    assert alone[0] in (0, 2), alone  # help or a usage error: nothing was run


# Short runs whose words `cfgopt.commands.fast_args` reads without argparse: what they print and their exit code
# are what argparse's reading gives (a usage error found after parsing shows the subcommand's usage either way).
RUNS = [
    ["lint", SEED],
    ["lint", "--isolated", "--format", "json", "--target", "mi300x", "--gpus", "8", SEED],
    ["lint", "--format=concise", "--select", "LF,DS", "--ignore", "PF", "-q", SEED, "fixtures/seed/ds_z3_config.json"],
    ["lint", "--show-settings", SEED],
    ["lint", "--statistics", "--exit-zero", SEED],
    ["lint", "--stdin-filename", "x.yaml", SEED],
    ["lint", "--config", "no_such_option=1", SEED],
    ["fix", "--diff", "--unsafe-fixes", SEED],
    ["fix", "--output-format", "json", SEED],
    ["rules", "--format", "markdown"],
    ["rule", "LF003"],
    ["rule", "--format", "json", "DS001"],
    ["rule", "XX999"],
]


@pytest.mark.parametrize("argv", RUNS, ids=" ".join)
def test_a_short_run_read_without_argparse_prints_what_argparse_reading_prints(
    argv: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setattr(fast_args, "parse", _counted(fast_args.parse))
    fast = _outcome(argv)
    assert fast_args.parse.answered == 1, "the reader read these words"  # type: ignore[attr-defined]
    monkeypatch.setattr(fast_args, "parse", lambda command, words: None)
    assert fast == _outcome(argv)


def _counted(parse):
    def counting(command: str, words: list[str]):
        namespace = parse(command, words)
        counting.answered += namespace is not None  # type: ignore[attr-defined]
        return namespace

    counting.answered = 0  # type: ignore[attr-defined]
    return counting
