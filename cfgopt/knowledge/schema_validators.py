"""DeepSpeed's pydantic *validators*, which a field table cannot carry, re-implemented from their code.

The schema snapshot lists every validator by name (`models.<Class>.validators`), and
tests/knowledge/test_schema_snapshot.py fails when one is neither implemented here nor listed in NOT_ERRORS, so a
DeepSpeed upgrade that adds a check cannot slip past unnoticed. Sources: deepspeed 0.19.8
runtime/precision_config.py and runtime/zero/config.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from cfgopt.text.user_text import is_int

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

Problem = tuple[tuple[str, ...], str]  # (location inside the section, DeepSpeed's message)


def _loss_scale(value: Any, field: str) -> str | None:
    if isinstance(value, bool):
        return "fp16.loss_scale must be a number, not bool"
    try:
        number = float(value)
    except (TypeError, ValueError):
        return "fp16.loss_scale must be a number"
    except OverflowError:  # DeepSpeed's own float(v) raises it too, and pydantic lets it through uncaught
        return "fp16.loss_scale is too large for a float (DeepSpeed's validator raises OverflowError)"
    if not math.isfinite(number):
        return "fp16.loss_scale must be a finite number (not inf/-inf/nan)"
    if number < 0:
        return "fp16.loss_scale must be >= 0 (0 enables dynamic loss scaling)"
    return None


def _integer_scale_param(value: Any, field: str) -> str | None:
    if isinstance(value, bool):
        return f"fp16.{field} must be an integer, not bool"
    if isinstance(value, float) and not math.isfinite(value):
        return f"fp16.{field} must be a finite number (not inf/-inf/nan)"
    try:
        int(value)
    except (TypeError, ValueError):
        return f"fp16.{field} must be an integer"
    return None


def _dynamic_loss_scale(section: dict[str, Any]) -> list[Problem]:
    enabled = section.get("enabled", False)
    if not enabled or float(section.get("loss_scale", 0)) != 0:
        return []
    out: list[Problem] = []
    if int(section.get("loss_scale_window", 1000)) <= 0:
        out.append(
            (
                ("loss_scale_window",),
                "fp16.loss_scale_window must be > 0 when dynamic loss scaling is enabled (loss_scale=0)",
            )
        )
    if int(section.get("min_loss_scale", 1)) <= 0:
        out.append(
            (("min_loss_scale",), "fp16.min_loss_scale must be > 0 when dynamic loss scaling is enabled (loss_scale=0)")
        )
    return out


def _stage(section: dict[str, Any]) -> int:
    try:
        return int(section.get("stage", 0))
    except (TypeError, ValueError, OverflowError):  # OverflowError: an infinite stage
        return 0


def _compute_grad_norm(section: dict[str, Any]) -> list[Problem]:
    if section.get("compute_grad_norm", True) in (False, 0, "false") and _stage(section) not in (1, 2):
        return [(("compute_grad_norm",), "compute_grad_norm=false is supported only with ZeRO Stage 1 or 2")]
    return []


def _offload_ratio(section: dict[str, Any]) -> list[Problem]:
    offload = section.get("offload_optimizer")
    if isinstance(offload, dict) and float(offload.get("ratio", 1.0)) < 1.0 and _stage(section) != 3:
        return [(("offload_optimizer", "ratio"), "Partial offloading only supported for ZeRO Stage 3.")]
    return []


def _zenflow(section: dict[str, Any]) -> list[Problem]:
    out: list[Problem] = []
    if section.get("select_strategy", "auto") not in ("auto", "step", "epoch"):
        out.append((("select_strategy",), 'select_strategy must be one of "auto", "step", or "epoch"'))
    for key in ("select_interval", "update_interval"):
        value = section.get(key, "auto")
        if isinstance(value, str) and value != "auto":
            out.append(((key,), f'If {key} is a string, it must be "auto"'))
    update = section.get("update_interval", "auto")
    if is_int(update) and update < 1:
        out.append((("update_interval",), "If update_interval is a number, it must be at least 1"))
    return out


FIELD_VALIDATORS: dict[str, Callable[[Any, str], str | None]] = {
    "DeepSpeedFP16Config._validate_loss_scale": _loss_scale,
    "DeepSpeedFP16Config._reject_non_integer_scale_params": _integer_scale_param,
}
MODEL_VALIDATORS: dict[str, Callable[[dict[str, Any]], list[Problem]]] = {
    "DeepSpeedFP16Config._validate_dynamic_loss_scale_params": _dynamic_loss_scale,
    "DeepSpeedZeroConfig.compute_grad_norm_valid": _compute_grad_norm,
    "DeepSpeedZeroConfig.offload_ratio_check": _offload_ratio,
    "ZenFlowConfig.validate_fields": _zenflow,
}
# Validators that never reject a config (they fill defaults or log), or guard blocks cfgopt does not
# model yet; with the reason.
NOT_ERRORS: dict[str, str] = {
    "DeepSpeedZeroConfig.overlap_comm_valid": "fills the default (True for stage 3); never rejects",
    "DeepSpeedZeroConfig.elastic_checkpoint_deprecated": "logs a deprecation warning; never rejects",
    "DeepSpeedZeroOffloadOptimizerConfig.set_pipeline": "derives `pipeline` from pipeline_read/write; never rejects",
    "DeepSpeedMonitorConfig.check_enabled": "derives `enabled` from the monitors; never rejects",
    "DeepSpeedZeroLeafModuleConfig._coerce_container_types": "normalises lists; never rejects",
    "DeepSpeedZeroLeafModuleConfig._validate_entries": "leaf_module block: not checked yet",
}


def run(model: str, validators: dict[str, Any], section: dict[str, Any], core_ok: bool) -> list[Problem]:
    """DeepSpeed's validators of `model` over a section (already stripped of "auto")."""
    out: list[Problem] = []
    for name, fields in validators.get("field", {}).items():
        check = FIELD_VALIDATORS.get(f"{model}.{name}")
        for field in fields if check else ():
            if field in section:
                message = check(section[field], field)
                if message:
                    out.append(((field,), message))
    if core_ok and not out:
        for name in validators.get("model", []):
            check_model = MODEL_VALIDATORS.get(f"{model}.{name}")
            if check_model is not None:
                out.extend(check_model(section))
    return out
