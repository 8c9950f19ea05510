"""LF058 judges the job's transformers and precision: FP8 is lost under transformers 5 with `bf16`/`fp16` on; under
4.x, without `bf16`/`fp16` (a launch-time ACCELERATE_MIXED_PRECISION=fp8 still reaches the Accelerator), with
`use_mca`, or where the transformers version is not stated, nothing is said. The oracle test
(tests/oracle/test_oracle_fp8_not_applied.py) shows the Trainer's precision itself."""

from __future__ import annotations

from pathlib import Path

import pytest
from job_configs import FP8_LORA_8B
from rule_cases import lint_diagnostics

TRAIN = FP8_LORA_8B


def _codes(tmp_path: Path, extra: str, transformers: str | None) -> list[str]:
    (tmp_path / "train.yaml").write_text(TRAIN + extra)
    options = ["--select", "LF058", "--llamafactory-version", "0.9.5"]
    if transformers is not None:
        options += ["--config", f'environment={{ transformers = "{transformers}" }}']
    return [d["code"] for d in lint_diagnostics(options, tmp_path / "train.yaml")]


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_transformers_5_with_mixed_precision_is_reported(tmp_path: Path, precision: str) -> None:
    assert _codes(tmp_path, f"{precision}: true\n", "5.6.0") == ["LF058"]


@pytest.mark.parametrize(
    ("extra", "transformers"),
    [
        ("bf16: true\n", "4.57.1"),  # 4.x: not the parse-time read this rule is about
        ("bf16: true\n", None),  # the version is not known
        ("", "5.6.0"),  # no bf16/fp16: the launch environment may carry fp8
        ("bf16: true\nuse_mca: true\n", "5.6.0"),  # Megatron's own FP8 path
    ],
)
def test_silent_where_it_is_not_established(tmp_path: Path, extra: str, transformers: str | None) -> None:
    assert _codes(tmp_path, extra, transformers) == []
