"""The launcher variables ENV010 and `cfgopt doctor` judge (cfgopt/knowledge/rocm_env.py): each logging or
debugging switch says its source and confidence, and is judged only on the platform it acts on."""

from __future__ import annotations

import pytest

from cfgopt.knowledge.rocm_env import DEBUG_SWITCHES, JUDGED, judge_variable
from cfgopt.knowledge.targets import TARGETS
from cfgopt.text.diagnostics import Severity


def test_every_switch_says_where_its_cost_is_documented() -> None:
    for name, switch in DEBUG_SWITCHES.items():
        assert switch.source.startswith("https://"), name
        assert switch.confidence in ("certain", "likely"), name
        assert switch.platform in ("rocm", "cuda", "any"), name
        assert name in JUDGED


@pytest.mark.parametrize(
    ("name", "value", "target", "expected"),
    [
        ("ROCBLAS_LAYER", "3", "mi300x", Severity.WARNING),
        ("ROCBLAS_LAYER", "0", "mi300x", None),
        ("ROCBLAS_LAYER", "3", "h100", None),  # rocBLAS is not used on NVIDIA
        ("ROCBLAS_LAYER", "3", None, Severity.WARNING),  # setting it says the job runs on ROCm
        ("AMD_LOG_LEVEL", "2", "mi300x", None),
        ("AMD_LOG_LEVEL", "3", "mi300x", Severity.WARNING),
        ("CUDA_LAUNCH_BLOCKING", "1", "h100", Severity.WARNING),
        ("CUDA_LAUNCH_BLOCKING", "1", "mi300x", None),
        ("NCCL_DEBUG", "INFO", "mi300x", Severity.INFO),
        ("NCCL_DEBUG", "trace", "h100", Severity.WARNING),
        ("NCCL_DEBUG", "WARN", "h100", None),
        ("TORCH_DISTRIBUTED_DEBUG", "INFO", "h100", None),
        ("TORCH_DISTRIBUTED_DEBUG", "DETAIL", "h100", Severity.WARNING),
        ("TORCH_NCCL_BLOCKING_WAIT", "1", "mi300x", Severity.WARNING),
        ("TORCH_SHOW_CPP_STACKTRACES", "1", "mi300x", None),
        ("ROCBLAS_LAYER", None, "mi300x", None),  # not a literal
    ],
)
def test_judged_per_platform(name: str, value: str | None, target: str | None, expected: Severity | None) -> None:
    judged = judge_variable(name, value, TARGETS[target] if target else None)
    assert (judged[0] if judged else None) == expected
