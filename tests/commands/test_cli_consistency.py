"""One CLI: an option means the same on every subcommand that has it (checked over the parsers `--help` prints),
ruff's conventions where ruff has one, and every flag the README and docs/*.md show exists."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest
from rule_cases import ROOT, run_cli

from cfgopt.cli import SUBCOMMANDS, build_parser
from cfgopt.commands.common import FORMATS


def _parsers() -> dict[str, argparse.ArgumentParser]:
    tree = build_parser()
    subs = dict(tree.subcommands)  # type: ignore[attr-defined]
    subs["schema export"] = subs["schema"].subcommands["export"]  # type: ignore[attr-defined]
    return {"": tree, **subs}


def _options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {name: action for action in parser._actions for name in action.option_strings}


PARSERS = _parsers()


def _signature(action: argparse.Action) -> tuple:
    """What must agree: the kind, the names, the metavar, and the choices (those of `--format` are one
    vocabulary, each subcommand naming the formats it can write: `test_format_names_...`)."""
    choices = () if "--format" in action.option_strings else tuple(action.choices or ())
    return (type(action).__name__, choices, action.metavar, tuple(action.option_strings))


def test_every_shared_option_has_the_same_names_choices_and_kind() -> None:
    seen: dict[str, dict[str, tuple]] = {}
    for command, parser in PARSERS.items():
        for name, action in _options(parser).items():
            if name in ("-h", "--help"):
                continue
            seen.setdefault(name, {})[command] = _signature(action)
    differing = {name: by for name, by in seen.items() if len(set(by.values())) > 1 and name != "--output-format"}
    assert not differing, differing


def test_format_names_are_one_vocabulary_with_rufss_alias() -> None:
    for command, parser in PARSERS.items():
        options = _options(parser)
        if "--format" not in options:
            continue
        assert "--output-format" in options["--format"].option_strings, command
        assert set(options["--format"].choices) <= {*FORMATS, "markdown"}, command
        assert "full" in options["--format"].choices, command


@pytest.mark.parametrize("command", ["lint", "fix", "doctor"])
def test_commands_that_report_findings_have_rufss_outcome_options(command: str) -> None:
    options = _options(PARSERS[command])
    assert {"--format", "--fail-on", "--exit-zero", "--statistics"} <= set(options)


@pytest.mark.parametrize("command", ["lint", "fix", "estimate", "verify", "tune"])
def test_target_lists_its_choices_with_none(command: str) -> None:
    target = _options(PARSERS[command])["--target"]
    assert "none" in target.choices and "mi300x" in target.choices
    assert "none:" in target.help and "mi300x" in target.help


@pytest.mark.parametrize("command", ["lint", "fix", "doctor"])
def test_paths_default_to_the_current_folder(command: str) -> None:
    (paths,) = [a for a in PARSERS[command]._actions if a.dest == "paths"]
    # doctor walks the current folder too, but must know none was named, to say so before a long walk
    assert paths.default == ([] if command == "doctor" else [Path(".")])
    assert "current folder" in paths.help or "(default: .)" in paths.help


def test_version_bare_call_and_bare_schema(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["-V"])
    assert exit_info.value.code == 0 and capsys.readouterr().out.startswith("cfgopt ")
    code, _, err = run_cli([])
    assert code == 2 and "usage: cfgopt" in err and "lint" in err
    code, _, err = run_cli(["schema"])
    assert code == 2 and "usage: cfgopt schema" in err and "export" in err


def test_old_format_name_text_is_still_read() -> None:
    code, out, _ = run_cli(["rules", "--format", "text"])
    assert code == 0 and out.startswith("code ")


# A flag in the docs: `--name` inside backticks or a code block, after `cfgopt SUB` on the same line with no other
# command in between (a pipe, `&&`, `;`, or another program's name).
_DOC_FILES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
_COMMAND = re.compile(r"cfgopt\s+(" + "|".join(sorted(SUBCOMMANDS, key=len, reverse=True)) + r")\b")
_FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]+)")
_ANOTHER_COMMAND = re.compile(r"\||&&|;|\b(llamafactory-cli|deepspeed|torchrun|accelerate|pip|python|git)\b")
NOT_CFGOPT = {  # flags of other tools the docs show (llamafactory-cli, deepspeed, torchrun, pip, pre-commit, git)
    "--nproc_per_node",
    "--num_gpus",
    "--extra",
    "--all-files",
    "--hook-stage",
    "--from-ref",
    "--to-ref",
}


def _documented() -> list[tuple[str, str, str]]:
    """(doc, subcommand or "", flag) for each flag shown in a code span or block."""
    found = []
    for doc in _DOC_FILES:
        text = doc.read_text(encoding="utf-8")
        code = re.findall(r"```.*?```|`[^`\n]+`", text, flags=re.DOTALL)
        for chunk in code:
            for line in chunk.splitlines():
                for match in _FLAG.finditer(line):
                    before = list(_COMMAND.finditer(line[: match.start()]))
                    between = line[before[-1].end() : match.start()] if before else ""
                    if before and not _ANOTHER_COMMAND.search(between):
                        found.append((doc.name, before[-1].group(1), match.group(1)))
    return found


def test_every_documented_flag_exists() -> None:
    missing = []
    documented = _documented()
    assert len(documented) > 50  # the README and docs show cfgopt's command lines: the pattern finds them
    for doc, command, flag in documented:
        if flag in NOT_CFGOPT:
            continue
        known = set(_options(PARSERS[command])) | set(_options(PARSERS.get(f"{command} export", PARSERS[""])))
        if flag not in known:
            missing.append(f"{doc}: cfgopt {command or '...'} {flag}")
    assert not missing, "\n".join(sorted(set(missing)))
