"""LF002 on a quoted GaLore / APOLLO / BAdam switch: from LLaMA-Factory 0.9.2 the start-up check adds the three
switches up (`int(use_galore) + int(use_apollo) + (use_badam)`, finetuning_args.py L598 in 0.9.5), so a string
there stops the run; 0.9.0 and 0.9.1 only test their truth (the run goes on, silently on)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cfgopt.job.settings import Settings
from cfgopt.lint.engine import lint_paths

CONFIG = """model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct
stage: sft
do_train: true
finetuning_type: full
dataset: alpaca_en_demo
template: llama3
output_dir: out
{key}: {value}
"""


def _lf002(tmp_path: Path, key: str, value: str, release: str) -> str | None:
    path = tmp_path / "train.yaml"
    path.write_text(CONFIG.format(key=key, value=value), encoding="utf-8")
    result = lint_paths([path], Settings(target_name="mi300x", gpus=1, llamafactory_version=release, select=["LF002"]))
    found = [str(d.severity) for d in result.diagnostics if d.code == "LF002"]
    return found[0] if found else None


@pytest.mark.parametrize(
    ("key", "value", "release", "severity"),
    [
        ("use_badam", '"true"', "0.9.5", "error"),  # int + str: TypeError
        ("use_badam", '"1"', "0.9.5", "error"),  # still a str beside the ints
        ("use_galore", '"false"', "0.9.5", "error"),  # int("false"): ValueError
        ("use_galore", '"1"', "0.9.5", "warning"),  # int("1") passes: the run goes on, galore on
        ("use_apollo", '"yes"', "0.9.2", "error"),
        ("use_badam", '"true"', "0.9.1", "warning"),  # `if self.use_galore and self.use_badam` only
    ],
)
def test_a_quoted_switch_is_an_error_where_the_start_up_adds_them(
    tmp_path: Path, key: str, value: str, release: str, severity: str
) -> None:
    assert _lf002(tmp_path, key, value, release) == severity
