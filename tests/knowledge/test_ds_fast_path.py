"""`DeepSpeedSchema.plain_errors` lets a lint run skip pydantic-core for DeepSpeed sections that are plain.
It may say "not sure" (None) for any section, never anything but pydantic-core's own verdict: held here
against pydantic-core on every field of every model of every shipped DeepSpeed snapshot, alone and next
to an unknown key."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from pydantic_core import ValidationError
from rule_cases import ROOT

from cfgopt.knowledge import schema
from cfgopt.rules.support.deepspeed import strip_auto

SAMPLES: list[Any] = [
    None, True, False, 0, 1, -1, 3, 2**31, 2**40, 2**63, 2**70, 0.5, 1.0, -1.0, 1e9, 5e8, 1e20, 1e300,
    math.inf, -math.inf, math.nan, "", "cpu", "none", "auto", "3", "true", [], [1], ["a"], {}, {"x": 1},
]  # fmt: skip


def core_verdict(ds: schema.DeepSpeedSchema, model: str, section: dict[str, Any]) -> list[tuple]:
    try:
        ds.model(model).validate_python(section)
    except ValidationError as exc:
        return [(tuple(e["loc"]), e["type"], e["msg"]) for e in exc.errors(include_url=False)]
    return []


def _values_for(ds: schema.DeepSpeedSchema, field: dict[str, Any]) -> list[Any]:
    values = list(SAMPLES)
    if field.get("enum"):
        values += field["enum"]["values"]
    for bound in (field.get("constraints") or {}).values():
        if isinstance(bound, (int, float)) and not isinstance(bound, bool):
            values += [bound, bound - 1, bound + 1, bound - 0.5, bound + 0.5, float(bound)]
    if field.get("model"):
        nested = ds.raw_models[field["model"]]["fields"]
        values += [{name: v} for name in list(nested)[:3] for v in SAMPLES[:12]]
        values += [{"no_such_key": 1}, {next(iter(nested)): 1, "no_such_key": 2}]
    return values


@pytest.mark.parametrize("version", schema.shipped_versions("deepspeed"))
def test_plain_errors_are_pydantic_cores(version: str) -> None:
    ds = schema.deepspeed(version)
    checked = judged = 0
    for model, spec in ds.raw_models.items():
        for name, field in spec["fields"].items():
            for key in filter(None, (name, field.get("alias"))):
                for value in _values_for(ds, field):
                    for section in ({key: value}, {"unknown_first": 0, key: value, "unknown_last": 1}):
                        checked += 1
                        plain = ds.plain_errors(model, section)
                        if plain is not None:
                            judged += 1
                            assert plain == core_verdict(ds, model, section), (model, section)
    assert judged > checked // 10  # the fast path is taken for a good share of plain values


def _sections(ds: schema.DeepSpeedSchema, data: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for dotted, model in ds.sections.items():
        section: Any = data
        for part in dotted.split("."):
            section = section.get(part) if isinstance(section, dict) else None
        if isinstance(section, dict):
            out.append((model, strip_auto(section)))
    return out


def test_real_configs() -> None:
    """Every DeepSpeed file of the fixtures: the fast path's verdict, when it gives one, is pydantic-core's;
    LLaMA-Factory's own example config (with the seed's typo, an unknown key) takes the fast path."""
    ds = schema.deepspeed()
    for path in sorted((ROOT / "fixtures").rglob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (ValueError, UnicodeDecodeError):
            continue
        for model, section in _sections(ds, data) if isinstance(data, dict) else []:
            plain = ds.plain_errors(model, section)
            assert plain is None or plain == core_verdict(ds, model, section), (path, model)
    seed = json.loads((ROOT / "fixtures" / "seed" / "ds_z3_config.json").read_text())
    verdict = ds.plain_errors("DeepSpeedZeroConfig", strip_auto(seed["zero_optimization"]))
    assert verdict == [(("stage3_parition_grads",), "extra_forbidden", "Extra inputs are not permitted")]


def test_sections_that_are_not_plain_still_get_pydantic_cores_verdict() -> None:
    from cfgopt.rules.support.deepspeed import validate_section

    assert validate_section("DeepSpeedZeroConfig", {"stage": "3"}) == []  # lax mode: a numeric string is fine
    assert validate_section("DeepSpeedZeroConfig", {"stage": "three"})
