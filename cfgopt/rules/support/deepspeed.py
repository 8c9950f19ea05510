"""Shared DeepSpeed logic for the DS rules: validating the strict sections the way the selected DeepSpeed
snapshot does (its version, for messages, is `ctx.ds_label`)."""

from __future__ import annotations

from cfgopt.knowledge import schema, schema_validators
from cfgopt.rules.base import Context
from cfgopt.text.record import Record
from cfgopt.text.source import Entry, Node, Source
from cfgopt.text.user_text import is_int

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class SectionError(Record):
    section: Entry  # the top-level entry, e.g. zero_optimization
    loc: tuple[Any, ...]  # inside the section, as pydantic reports it (input key names)
    type: str
    message: str
    model: str


def strip_auto(value: Any) -> Any:
    """DeepSpeedConfigModel.__init__ drops every key whose value is the string "auto" (the field default
    applies); under the HF Trainer the keys it fills were already replaced, the rest behave the same way."""
    if isinstance(value, dict):
        return {k: strip_auto(v) for k, v in value.items() if v != "auto"}
    return value


def section_entry(source: Source, dotted: str) -> Entry | None:
    return source.find(tuple(dotted.split(".")))


def validate_section(
    model_name: str, value: dict[str, Any], ds: schema.DeepSpeedSchema | None = None
) -> list[tuple[tuple[Any, ...], str, str]]:
    """What DeepSpeed's class `model_name` says of a section: (location, error type, message) for each
    problem; empty when DeepSpeed accepts it. Its pydantic schema first, then its validators."""
    ds = ds or schema.deepspeed()
    section = strip_auto(value)
    out = _core_errors(ds, model_name, section)
    core_ok = not out
    out.extend((loc, "value_error", message) for loc, message in _nested_validators(ds, model_name, section, core_ok))
    return out


def _core_errors(
    ds: schema.DeepSpeedSchema, model_name: str, section: dict[str, Any]
) -> list[tuple[tuple[Any, ...], str, str]]:
    """pydantic-core's errors for a section. A plain one (the common case, unknown keys included) is judged
    without it (`DeepSpeedSchema.plain_errors`), so pydantic-core is imported only for a section it must judge."""
    plain = ds.plain_errors(model_name, section)
    if plain is not None:
        return list(plain)
    from pydantic_core import ValidationError

    try:
        ds.model(model_name).validate_python(section)
    except ValidationError as exc:
        # include_url=False: the documentation URLs import all of pydantic (~20 ms of a cold run) to be built
        return [(tuple(err["loc"]), err["type"], err["msg"]) for err in exc.errors(include_url=False)]
    return []


def _nested_validators(
    ds: schema.DeepSpeedSchema, model_name: str, section: dict[str, Any], core_ok: bool, prefix: tuple[Any, ...] = ()
) -> list[tuple[tuple[Any, ...], str]]:
    """DeepSpeed's validators of a model and of the nested models (offload blocks, zenflow) it holds."""
    spec = ds.raw_models[model_name]
    out = [
        ((*prefix, *loc), msg)
        for loc, msg in schema_validators.run(model_name, spec.get("validators", {}), section, core_ok)
    ]
    for name, field in spec["fields"].items():
        nested = field.get("model")
        value = section.get(name, section.get(field.get("alias") or name))
        if nested and isinstance(value, dict):
            out += _nested_validators(ds, nested, value, core_ok, (*prefix, name))
    return out


def section_errors(ctx: Context) -> list[SectionError]:
    """Every strict section's problems, computed once per file and shared by DS001 and DS005."""
    source, memo = ctx.source, ctx.memo
    if "section_errors" in memo:
        return memo["section_errors"]
    ds = ctx.settings.ds_schema
    out: list[SectionError] = []
    for dotted, model_name in ds.sections.items():
        entry = section_entry(source, dotted)
        if entry is None or not isinstance(entry.node.value, dict):
            continue
        for loc, kind, message in validate_section(model_name, entry.node.value, ds):
            out.append(SectionError(entry, loc, kind, message, model_name))
    memo["section_errors"] = out
    return out


def locate(section: Entry, loc: tuple[Any, ...]) -> Entry:
    """The deepest entry a pydantic error location reaches (the section itself if none)."""
    node: Node = section.node
    found = section
    for part in loc:
        if not isinstance(part, str) or node.entries is None:
            break
        entry = node.get(part)
        if entry is None:
            break
        found, node = entry, entry.node
    return found


def zero_stage(source: Source) -> int | None:
    """The ZeRO stage DeepSpeed will run (None when it cannot be told statically)."""
    data = source.data if isinstance(source.data, dict) else {}
    zero = data.get("zero_optimization")
    if zero is True:
        return 1
    if not isinstance(zero, dict):
        return 0 if zero is None else None
    stage = zero.get("stage", 0)
    if stage == "auto":
        return 0
    try:
        return int(stage)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an infinite stage (DS005 reports it)
        return None


def enabled(source: Source, block: str) -> Any:
    data = source.data if isinstance(source.data, dict) else {}
    value = data.get(block)
    return value.get("enabled") if isinstance(value, dict) else None


# ---------------------------------------------------------------------------------------------------------
# Added for the DS010+ / XF003+ / PF050+ rules.

# Keys the HF Trainer + accelerate path fills from "auto", beyond the snapshot's `hf_auto_keys`
# (transformers `trainer_config_process` / `trainer_config_finalize`, accelerate `_prepare_deepspeed`):
# accelerate 1.11.0 utils/dataclasses.py L1243-1255 `DeepSpeedPlugin.__post_init__` fill_match()es its own
# plugin fields (stage from ACCELERATE_DEEPSPEED_ZERO_STAGE, default 2; offload devices "none"; NVMe paths
# "none"), and L1289 overwrites `steps_per_print` with inf before any "auto" is checked.
PLUGIN_FILLED_KEYS = frozenset(
    {
        "zero_optimization.stage",
        "zero_optimization.offload_optimizer.device",
        "zero_optimization.offload_param.device",
        "zero_optimization.offload_optimizer.nvme_path",
        "zero_optimization.offload_param.nvme_path",
        "zero_optimization.stage3_gather_16bit_weights_on_model_save",
        "gradient_accumulation_steps",
        "gradient_clipping",
        "steps_per_print",
    }
)


def hf_filled_keys(ds: schema.DeepSpeedSchema) -> frozenset[str]:
    """Dotted keys whose "auto" the HF Trainer / accelerate replace; any other "auto" makes accelerate raise."""
    return frozenset(ds.hf_auto_keys) | PLUGIN_FILLED_KEYS


def zero_block(source: Source) -> Entry | None:
    entry = source.find(("zero_optimization",))
    return entry if entry is not None and entry.node.is_mapping else None


def hf_is_zero3(source: Source) -> bool:
    """ZeRO-3 as transformers/accelerate see it (`HfDeepSpeedConfig.is_zero3`: `self._stage == 3`, the raw
    value): `"3"` is not ZeRO-3 for them, and "auto" is filled with accelerate's default stage 2."""
    zero = zero_block(source)
    stage = zero.node.get("stage") if zero is not None else None
    value = stage.node.value if stage is not None else None
    return is_int(value) and value == 3


def offload_device(source: Source, block: str) -> str:
    """`offload_optimizer` / `offload_param` device DeepSpeed will use: "none", "cpu" or "nvme"."""
    entry = source.find(("zero_optimization", block, "device"))
    value = entry.node.value if entry is not None else None
    return value if value in ("cpu", "nvme") else "none"


_TRUE_STRINGS = {"true", "yes", "on", "1", "t", "y"}


def lax_true(value: object) -> bool:
    """True as DeepSpeed's pydantic (lax mode) reads a bool field: `"yes"` and 1 count, `"auto"` does not."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return value == 1
    return isinstance(value, str) and value.strip().lower() in _TRUE_STRINGS


def readers_keep(ctx: Context) -> str:
    """For a DeepSpeed JSON's finding about to carry an edit of the JSON (MEM002, PF051): "" where it may, else the
    message's ending that says the JSON is left as it is, and which configs outside the run read it
    (`plan.json_fixes.json_readers_words`): their jobs are not judged here, so the edit could harm them."""
    from cfgopt.plan.json_fixes import json_readers_words

    folder = ctx.source.document.path.parent
    readers = json_readers_words(ctx.source, ctx.consumers, ctx.job_of(ctx.consumers[0]), folder)
    return f"; not fixed: {readers}" if readers else ""
