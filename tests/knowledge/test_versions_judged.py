"""Messages name the versions judged, never module constants: every rule's fixture cases, linted with each
shipped LLaMA-Factory and DeepSpeed snapshot, name no other release of either as the one judged (#13)."""

from __future__ import annotations

import json
import re

import pytest
from rule_cases import all_cases, case_args, input_files, job_folder, run_cli
from sampling import params

from cfgopt.knowledge.schema import shipped_versions

VERSION = re.compile(r"\b(LLaMA-Factory|DeepSpeed) v?(\d+\.\d+\.\d+)")
# Sentences comparing releases (cfgopt.knowledge.versions) name the others on purpose: `valid in 0.9.4, not in 0.9.5`.
HISTORY = re.compile(r"valid in|added after|removed by|still read|differs between releases|but .* in \d|passes")


def _pairs() -> list[tuple[str, str]]:
    lf, ds = shipped_versions("llamafactory"), shipped_versions("deepspeed")
    # both directions: the oldest and the newest of each, crossed
    return sorted({(lf[0], ds[0]), (lf[-1], ds[-1]), (lf[0], ds[-1]), (lf[-1], ds[0])})


def _named(text: str, lf: str, ds: str) -> list[str]:
    want = {"LLaMA-Factory": lf, "DeepSpeed": ds}
    return [m.group(0) for m in VERSION.finditer(text) if m.group(2) != want[m.group(1)]]


@pytest.mark.parametrize(("lf", "ds"), params(_pairs(), 2))  # two of the four by default, all with --full
def test_messages_name_the_versions_judged(lf: str, ds: str) -> None:
    wrong: list[str] = []
    for case in all_cases():
        with job_folder(case) as folder:
            argv = ["lint", "--format", "json", *map(str, input_files(folder)), *case_args(case)]
            _, out, _ = run_cli([*argv, "--llamafactory-version", lf, "--deepspeed-version", ds])
        for d in json.loads(out)["diagnostics"]:
            for text in (d["message"], (d.get("fix") or {}).get("description", "")):
                others = _named(text, lf, ds)
                if others and not HISTORY.search(text):
                    wrong.append(f"{case.parent.name}/{case.name} {d['code']}: {others} in {text!r}")
    assert not wrong, "\n".join(wrong[:20])


def test_the_check_sees_a_constant() -> None:
    """The pattern catches what #13 reported: LF003 judged for 0.9.4 saying "in LLaMA-Factory 0.9.5"."""
    assert _named("in LLaMA-Factory 0.9.5 it passes the parser", "0.9.4", "0.19.8") == ["LLaMA-Factory 0.9.5"]
