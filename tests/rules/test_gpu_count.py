"""Without `--gpus`, an explicit `train_batch_size` that holds on one GPU count only is said (DS007, XF002), so the
output never contradicts the count its advice assumes; with the count given, the verdict is DeepSpeed's for it."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from rule_cases import CASES_DIR, run_cli

from cfgopt.rules.support.gpu_count import pinned_world


@pytest.mark.parametrize(
    ("values", "world"),
    [
        ((32, 4, 4), 2),
        ((256, 32, 1), 8),
        ((16, 4, 4), None),  # one GPU: what the advice assumes
        ((24, 4, 4), None),  # no count holds: DS007's error
        ((32.0, 4, 4.0), 2),  # DeepSpeed does the arithmetic on the numbers as given
        ((4 * 4 * 2048, 4, 4), None),  # beyond 1024 GPUs
        ((10**400, 4, 4), None),  # no float can hold the quotient
        ((math.nan, 4, 4), None),
        ((32, "auto", 4), None),
        ((32, True, 4), None),  # a boolean is DS005's
    ],
)
def test_the_one_count_a_batch_holds_on(values: tuple, world: int | None) -> None:
    assert pinned_world(*values) == world


def _lint(case: str, *args: str) -> list[dict]:
    folder = CASES_DIR / case
    files = sorted(str(p) for p in folder.iterdir() if p.suffix in (".json", ".yaml"))
    _, out, err = run_cli(["lint", "--format", "json", "--no-config", "--select", "DS007,XF002", *files, *args])
    assert out.strip(), err
    return json.loads(out)["diagnostics"]


@pytest.mark.parametrize("case", ["DS007/one-gpu-count", "XF002/gpu-count"])
def test_said_as_an_info_without_a_count_and_judged_with_one(case: str) -> None:
    (info,) = [d for d in _lint(case) if Path(d["file"]).name == "ds.json"]
    assert info["severity"] == "info" and "hold only on 2 GPUs" in info["message"], info
    assert [d for d in _lint(case, "--gpus", "2") if Path(d["file"]).name == "ds.json"] == []
    assert {d["severity"] for d in _lint(case, "--gpus", "1") if Path(d["file"]).name == "ds.json"} == {"error"}
