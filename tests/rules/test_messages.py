"""Proofreading every message the rule fixtures produce: doubled words, a word missing before a subject
("it the run fails", "it TrainingArguments stops"), the article before a number or a GPU name, an error that
does not say what the real tool does, stray spacing."""

from __future__ import annotations

import json
import re
from functools import cache

import pytest
from rule_cases import all_cases, case_args, input_files, job_folder, run_cli

# Quoted material (`...`, '...') is the real tool's or the user's text: not proofread here.
QUOTED = re.compile(r"`[^`]*`|'[^']*'")
DOUBLED = re.compile(r"\b(\w+) \1\b", re.IGNORECASE)
IT_THEN_SUBJECT = re.compile(r"\bit (?:the|a|an|TrainingArguments|LLaMA-Factory|DeepSpeed|accelerate|transformers)\b")
# "a 80 GiB", "a h100", "a 8B model", "a mi300x" (an eighty, an aitch, an eight, an em-eye)
A_BEFORE_VOWEL_SOUND = re.compile(r"\ba (?:8|80|11\b|18\b|[hH]\d|mi\d|MI\d|[aeioAEIO]\w)")
# An error says what the real tool does about it.
SAYS_WHAT_FAILS = re.compile(
    r"stop|fail|reject|crash|raise|refuse|exit|not found|cannot|invalid|error|no chat template|does not exist"
)


@cache
def messages() -> list[tuple[str, str, str]]:
    """(case, severity, message) for every diagnostic of every fixture case."""
    out = []
    for case in all_cases():
        with job_folder(case) as folder:
            files = [str(f) for f in input_files(folder)]
            _, text, _ = run_cli(["lint", "--format", "json", *files, *case_args(case)])
        for d in json.loads(text)["diagnostics"]:
            out.append((f"{case.parent.name}/{case.name}", d["severity"], d["message"]))
    return out


def unquoted(message: str) -> str:
    return QUOTED.sub("`…`", message)


@pytest.mark.parametrize(
    ("pattern", "what"),
    [
        (DOUBLED, "a doubled word"),
        (IT_THEN_SUBJECT, "a word missing after `it`"),
        (A_BEFORE_VOWEL_SOUND, "`a` where `an` is read (use cfgopt.rules.support.wording.a)"),
        (re.compile(r"  |\s[,;.:](?=\s|$)|\s$|^\s"), "stray spacing"),
    ],
    ids=["doubled", "it-subject", "article", "spacing"],
)
def test_fixture_messages_read_correctly(pattern: re.Pattern[str], what: str) -> None:
    bad = [(case, m) for case, _, m in messages() if pattern.search(unquoted(m))]
    assert not bad, f"{what}: {bad[:5]}"


def test_every_error_says_what_the_real_tool_does() -> None:
    bad = [(case, m) for case, sev, m in messages() if sev == "error" and not SAYS_WHAT_FAILS.search(m)]
    assert not bad, bad[:5]


def test_the_checks_catch_the_known_slips() -> None:
    assert IT_THEN_SUBJECT.search("in LLaMA-Factory 0.9.5 it the run fails")
    assert IT_THEN_SUBJECT.search("in LLaMA-Factory 0.9.5 it TrainingArguments stops at once")
    assert DOUBLED.search(unquoted("the the run"))
    assert not DOUBLED.search(unquoted("`the the` is quoted"))
    assert A_BEFORE_VOWEL_SOUND.search("of a 80 GiB h100") and not A_BEFORE_VOWEL_SOUND.search("of a 141 GiB h200")
