"""The shell lexer (`cfgopt.loaders.shell`): the same words as `shlex.split(posix=True)` where shlex is
right (no expansions), expansions kept whole, heredocs and multi-line strings found, and linear time on
any input."""

from __future__ import annotations

import shlex

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from work_counter import assert_linear

from cfgopt.loaders import shell

PLAIN_WORD = st.text(alphabet="abz019_-.=/:,+%@", min_size=1, max_size=6)
QUOTED = st.one_of(
    PLAIN_WORD.map(lambda w: f"'{w} {w}'"),
    PLAIN_WORD.map(lambda w: f'"{w} \\"{w}\\""'),
    PLAIN_WORD.map(lambda w: f"{w}\\ {w}"),
    PLAIN_WORD.map(lambda w: f"{w}'{w}'\"{w}\""),
)
SEPARATOR = st.sampled_from([" ", "  ", "\t", " \\\n  ", " \\\r\n"])


def words_of(line: str) -> list[str]:
    return [w.text for w in shell.command_words(line, 0).words]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(PLAIN_WORD, QUOTED), min_size=1, max_size=8), st.data())
def test_words_equal_shlex_posix(parts: list[str], data) -> None:
    line = "".join(p + data.draw(SEPARATOR) for p in parts).rstrip(" \t\\\r\n")
    # shlex does not join `\`-newline continuations as the shell does: remove them first
    joined = line.replace("\\\r\n", "").replace("\\\n", "")
    assert words_of(line) == shlex.split(joined, posix=True)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("--out out_$(date +%s) --bf16 True", ["--out", "out_$(date +%s)", "--bf16", "True"]),
        ("--out $(echo 'a )' \"$(b c)\") x", ["--out", "$(echo 'a )' \"$(b c)\")", "x"]),
        ("--out `date +%s`x --lr ${LR:-1e-4}", ["--out", "`date +%s`x", "--lr", "${LR:-1e-4}"]),
        ("--a 1 > log 2>&1 --b 2", ["--a", "1", "--b", "2"]),
        ("--a 1 | tee log", ["--a", "1"]),
        ("--a 1 ) ; echo", ["--a", "1"]),
        ("--a 1 # --b 2", ["--a", "1"]),
        ("--a x#y", ["--a", "x#y"]),
        ("--a 'unterminated", ["--a", "unterminated"]),
        ("--a \\", ["--a", "\\"]),
        ("--a \\\r", ["--a", "\r"]),
        ("--a $'x\\ty'", ["--a", "$'x\\ty'"]),
        ("--seed $((RANDOM % 100)) --bf16 True", ["--seed", "$((RANDOM % 100))", "--bf16", "True"]),
        ("--a $( (echo 1) ) --b 2", ["--a", "$( (echo 1) )", "--b", "2"]),
        ("--a $(case $x in a) echo 1;; esac) --b 2", ["--a", "$(case $x in a) echo 1;; esac)", "--b", "2"]),
        ("--a $((1 + (2 * 3))) --b", ["--a", "$((1 + (2 * 3)))", "--b"]),
        ("--a <(sort f) --b 2 &> log", ["--a", "<(sort f)", "--b", "2"]),
        ("--a 1 {fd}>log 3<in --b", ["--a", "1", "--b"]),
        ("--a 1 > >(tee log) 2> >(tee err >&2) --b", ["--a", "1", "--b"]),
    ],
)
def test_command_words(line: str, expected: list[str]) -> None:
    assert words_of(line) == expected


def test_spread_words_may_become_several_arguments() -> None:
    words = shell.command_words('$A "$B" "$@" $@ "${X[@]}" $(c) "$(d)" $((1+2)) `e` f', 0).words
    assert {w.text: w.spread for w in words} == {
        "$A": True,
        "$B": False,
        "$@": True,
        "${X[@]}": True,
        "$(c)": True,
        "$(d)": False,
        "$((1+2))": False,
        "`e`": True,
        "f": False,
    }


def test_scan_finds_every_simple_command() -> None:
    text = (
        "export A=1\nfor x in 1 2; do run $x && other | tee l; done\n  indented\n"
        "X=$(inner; case $y in a) cased;; esac) outer\ncat <<EOF\nnot a command\nEOF\nf() { body; }\n"
    )
    firsts = [c.words[0].text for c in shell.scan(text).commands]
    assert firsts == [
        "export",
        "for",
        "do",
        "other",
        "tee",
        "done",
        "indented",
        "X=$(inner; case $y in a) cased;; esac)",
        "inner",
        "cased",
        "cat",
        "f",
        "{",
        "}",
    ]


def test_expansions_are_not_literal() -> None:
    literal = {w.text: w.literal for w in shell.command_words("a $X \"$Y\" '$Z' $(d) `e` f", 0).words}
    assert literal == {"a": True, "$X": False, "$Y": False, "$Z": True, "$(d)": False, "`e`": False, "f": True}


def test_layout_finds_heredocs_strings_and_comments() -> None:
    text = "cat > c.yaml <<-'EOF'\n\ta: 1 # c\n\tEOF\necho \"x\ny\" # note\nrun <<E\nE\n"
    layout = shell.layout(text)
    body = text.index("\ta: 1")
    assert layout.in_opaque(body) and layout.in_opaque(text.index("# c"))
    assert layout.in_opaque(text.index('"x') + 1)
    assert layout.in_comment(text.index("# note")) and not layout.in_opaque(text.index("# note"))
    assert not layout.in_opaque(text.index("run"))


@pytest.mark.parametrize(
    "text",
    [
        "\\" * 20000,
        "$(" * 5000,
        '"$(' * 5000,
        "'" * 20001,
        "<<" * 5000 + "\n",
        "`" * 20001,
        "${" * 5000,
        "x\\\r" * 5000,
        "$((" * 5000,
        "$( (" * 5000,
        "((" * 5000,
        "case x in " * 5000,
        "case x in a) " * 5000,
        "a=(" * 5000,
        "<(" * 5000,
        "$(case x in a) " * 3000,
    ],
)
def test_lexer_ends_quickly_on_hostile_input(text: str) -> None:
    shell.layout(text)
    shell.command_words(text, 0)
    half = text[: len(text) // 10]  # the step count doubles with the text: no rescan
    assert_linear(lambda n: (shell.layout(half * n), shell.command_words(half * n, 0)), 1)


@pytest.mark.parametrize(
    "text",
    [
        "(llamafactory-cli train --a $(" * 3000,
        "llamafactory-cli train --a 1 <<E\n" * 3000,
        'llamafactory-cli train --a "$(\n' * 3000,
        "A=b " * 20000 + "lmfx train\n",
    ],
)
def test_finding_commands_stays_linear(text: str) -> None:
    """Many commands nested in one another's `$(`, or thousands of heredocs: no quadratic rescan."""
    from pathlib import Path

    from cfgopt.loaders.launch import find_commands
    from cfgopt.text.document import Document

    find_commands(Document(path=Path("run.sh"), text=text))
    part = text[: len(text) // 10]
    assert_linear(lambda n: find_commands(Document(path=Path("run.sh"), text=part * n)), 1)


FRAGMENTS = st.sampled_from(
    [
        "llamafactory-cli train ",
        "--a 1 ",
        "$((1 + (2)) ",
        "$( (x) ) ",
        "$(case $y in a) b;; esac) ",
        "'q ) '",
        '"$(d "e")" ',
        "`t` ",
        "${X:-)} ",
        "<<E\nbody )\nE\n",
        "# c )\n",
        "\\\n",
        "; ",
        "&& ",
        "| ",
        "& ",
        "(",
        ")",
        "\n",
        "case z in ",
        "a) ",
        ";; ",
        "esac ",
        "A=(1 2) ",
        "2>&1 ",
        "<(s) ",
        "do ",
        "{ ",
        "} ",
        "((i++)) ",
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(FRAGMENTS, max_size=40))
def test_scan_of_any_fragment_soup_is_well_formed(parts: list[str]) -> None:
    """Whatever the input, the scan ends, and every command and word lies inside the text, in order."""
    text = "".join(parts)
    script = shell.scan(text)
    starts = [c.start for c in script.commands]
    assert starts == sorted(starts)
    for command in script.commands:
        assert 0 <= command.start <= command.end <= len(text)
        for word in command.words:
            assert command.start <= word.start < word.end <= command.end
