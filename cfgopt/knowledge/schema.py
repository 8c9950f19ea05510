"""Versioned schema snapshots of the real tools, read at lint time without importing them.

`scripts/sync_schemas.py` writes `cfgopt/knowledge/schemas/<package>-<version>.json` by introspecting the pinned
llamafactory / transformers / deepspeed; the oracle test group regenerates them and fails on drift.
LLaMA-Factory fields are checked by `cfgopt.rules` directly from the field table, because its YAML path
(`HfArgumentParser.parse_dict`) does no type coercion, which pydantic's lax mode would not mirror.
DeepSpeed's strict sections *are* pydantic models in DeepSpeed, so they are rebuilt here as pydantic(-core)
validators with the same aliases, enums, constraints and `extra="forbid"`, and validated the same way.
"""

from __future__ import annotations

import enum
import json
import math
import operator
import os
from functools import cache, cached_property
from pathlib import Path

from cfgopt.text.record import Record
from cfgopt.text.requirements.versions import version_key

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

SCHEMA_DIR = Path(__file__).parent / "schemas"
LLAMAFACTORY_VERSION = "0.9.5"
DEEPSPEED_VERSION = "0.19.8"


@cache
def _read(name: str) -> dict[str, Any]:
    return json.loads((SCHEMA_DIR / name).read_text(encoding="utf-8"))


# Up to 0.9.3 LLaMA-Factory read a YAML config with PyYAML's `yaml.safe_load` (0.9.0-0.9.2 through
# `HfArgumentParser.parse_yaml_file`, 0.9.3 directly, hparams/parser.py L65); from 0.9.4 with `OmegaConf.load`
# (L75): its float resolver also takes `1e-4`, and it rejects a repeated key that PyYAML lets the last one win.
FIRST_OMEGACONF_LOAD = (0, 9, 4)


def reads_yaml_with_pyyaml(llamafactory_version: str) -> bool:
    """Did this LLaMA-Factory release read its YAML configs with PyYAML (not OmegaConf)?"""
    return version_key(llamafactory_version)[:3] < FIRST_OMEGACONF_LOAD


def ds_section_values(version: str) -> dict[str, dict[str, str]]:
    """What DeepSpeed `version`'s config reader raises for a top-level block that is not an object, by block and
    value kind (scripts/probe_ds_sections.py ran it; empty for a release not probed)."""
    return _read("ds-section-values.json").get(version, {}).get("sections", {})


# --------------------------------------------------------------------------- shipped versions


@cache
def shipped_versions(package: str) -> tuple[str, ...]:
    """Versions with a snapshot in `cfgopt/knowledge/schemas/` for `package` ("llamafactory" / "deepspeed"), oldest
    first. Only file names are listed; no snapshot is read."""
    prefix = f"{package}-"
    # the names `SCHEMA_DIR.glob(f"{prefix}*.json")` lists, without its pattern (fnmatch compiles one per call)
    names = [n for n in os.listdir(SCHEMA_DIR) if n.startswith(prefix) and n.endswith(".json")]
    found = [n[len(prefix) : -len(".json")] for n in names if len(n) >= len(prefix) + len(".json")]
    return tuple(sorted(found, key=version_key))


def newest_version(package: str) -> str:
    return shipped_versions(package)[-1]


# --------------------------------------------------------------------------- LLaMA-Factory


class FieldSpec(Record):
    name: str
    types: tuple[str, ...]
    choices: tuple[Any, ...] | None
    choices_kind: str | None
    default: Any
    help: str
    dataclasses: tuple[str, ...]

    @property
    def nullable(self) -> bool:
        return "null" in self.types

    @property
    def is_bool(self) -> bool:
        return "bool" in self.types

    @property
    def numeric_only(self) -> bool:
        """int/float and never a string: a quoted number reaches the trainer as a str."""
        return bool({"int", "float"} & set(self.types)) and not ({"str", "any", "dict", "list"} & set(self.types))


class ReportTo(Record):
    """What `report_to` may hold for the Trainer of the transformers a snapshot was taken with
    (scripts/sync_schemas.py `report_to_values` runs each through TrainingArguments and the Trainer's check)."""

    integrations: tuple[str, ...]  # the names `get_reporting_integration_callbacks` accepts, in its order
    words: frozenset[str]  # whole-value words TrainingArguments turns into a list first: `none`, `all`
    null: bool  # does a null get through (transformers 4: `all`; transformers 5: `[None]`, refused)

    def accepts(self, value: Any) -> bool:
        """Does the Trainer take `report_to: value` (a string, a list of them, or null) when it is built?"""
        if value is None:
            return self.null
        if isinstance(value, str) and value in self.words:
            return True
        if isinstance(value, list) and len(value) == 1 and value[0] in self.words:
            return True  # `[none]` and `[all]` are the words too (training_args.py compares both)
        items = value if isinstance(value, list) else [value]
        return all(isinstance(item, str) and item in self.integrations for item in items)


class LlamaFactorySchema:
    def __init__(self, data: dict[str, Any]) -> None:
        self.version = data["version"]
        self.transformers = data.get("transformers", "")
        self.groups: dict[str, list[str]] = data["groups"]
        self.not_settable: set[str] = set(data.get("not_settable", []))
        # Chat templates the release registers (data/template.py); None: a snapshot taken without them.
        templates = data.get("templates")
        self.templates: frozenset[str] | None = frozenset(templates) if templates is not None else None
        # What `report_to` may hold for the snapshot's transformers; None: a snapshot taken without it.
        report_to = data.get("report_to")
        self.report_to: ReportTo | None = (
            ReportTo(tuple(report_to["integrations"]), frozenset(report_to["words"]), bool(report_to["null"]))
            if report_to is not None
            else None
        )
        self.fields: dict[str, FieldSpec] = {  # by position, FieldSpec's order: 350 records on every lint
            name: FieldSpec(
                name,
                tuple(spec.get("types") or ("any",)),
                tuple(spec["choices"]) if spec.get("choices") is not None else None,
                spec.get("choices_kind"),
                spec.get("default"),
                spec.get("help", ""),
                tuple(spec.get("dataclasses", ())),
            )
            for name, spec in data["fields"].items()
        }
        self._group_fields: dict[str, dict[str, FieldSpec]] = {}

    def group(self, group: str) -> dict[str, FieldSpec]:
        """The fields `llamafactory-cli <subcommand>` accepts (train / infer / eval)."""
        if group not in self._group_fields:
            owners = set(self.groups.get(group, ()))
            self._group_fields[group] = {
                name: spec for name, spec in self.fields.items() if owners & set(spec.dataclasses)
            }
        return self._group_fields[group]


@cache
def llamafactory(version: str = LLAMAFACTORY_VERSION) -> LlamaFactorySchema:
    return LlamaFactorySchema(_read(f"llamafactory-{version}.json"))


def llamafactory_versions() -> dict[str, LlamaFactorySchema]:
    """Every shipped LLaMA-Factory snapshot, oldest first (reads them all: for version comparisons only)."""
    return {v: llamafactory(v) for v in shipped_versions("llamafactory")}


_TRUTHY = ("yes", "true", "t", "y", "1")
_FALSY = ("no", "false", "f", "n", "0")


def argparse_convert(spec: FieldSpec, raw: str) -> tuple[bool, Any, str]:
    """Convert a command-line token the way HfArgumentParser's argparse types do.

    Returns (ok, value, argparse's error). transformers `HfArgumentParser._parse_dataclass_field`:
    Enum/Literal fields get `choices` (exact, case-sensitive), bools `string_to_bool`, numbers int()/float().
    """
    if spec.choices is not None:
        by_text = {str(c): c for c in spec.choices}
        if raw in by_text:
            return True, by_text[raw], ""
        choices = ", ".join(repr(str(c)) for c in spec.choices)
        return False, raw, f"invalid choice: {raw!r} (choose from {choices})"
    if spec.is_bool:
        low = raw.lower()
        if low in _TRUTHY:
            return True, True, ""
        if low in _FALSY:
            return True, False, ""
        return (
            False,
            raw,
            (
                f"Truthy value expected: got {raw} but expected one of yes/no, true/false, t/f, y/n, 1/0 "
                "(case insensitive)."
            ),
        )
    for kind, conv in (("int", int), ("float", float)):
        if kind in spec.types and "str" not in spec.types:
            try:
                return True, conv(raw), ""
            except ValueError:
                if kind == "int" and "float" in spec.types:
                    continue
                return False, raw, f"invalid {kind} value: {raw!r}"
    return True, raw, ""


# --------------------------------------------------------------------------- DeepSpeed


class DeepSpeedSchema:
    def __init__(self, data: dict[str, Any]) -> None:
        self.version = data["version"]
        self.raw_models: dict[str, Any] = data["models"]
        self.sections: dict[str, str] = data["sections"]
        self.top_level_keys: set[str] = set(data["top_level_keys"])
        self.removed_top_level: dict[str, str] = data.get("removed_top_level", {})
        self.removed_zero: dict[str, str] = data.get("removed_zero", {})
        self.hf_auto_keys: set[str] = set(data.get("hf_auto_keys", []))
        # Keys read outside the pydantic models (dotted, nested ones of plain blocks) and their defaults.
        self.plain_reads: set[str] = set(data.get("plain_reads", []))
        self.plain_defaults: dict[str, Any] = data.get("plain_defaults", {})
        self._models: dict[str, Any] = {}
        self._keys: dict[str, dict[str, str]] = {}

    @cached_property
    def blocks(self) -> set[str]:
        """The top-level keys the release reads as objects: its pydantic sections (`timers.throughput` included)
        and the plain blocks whose nested keys it reads (`activation_checkpointing.partition_activations`, ...)."""
        plain = {key.split(".", 1)[0] for key in (*self.plain_reads, *self.plain_defaults) if "." in key}
        return ({key.split(".", 1)[0] for key in self.sections} | plain) & self.top_level_keys

    def field_names(self, model: str) -> set[str]:
        """Every key a strict section accepts: field names and their aliases."""
        out: set[str] = set()
        for name, spec in self.raw_models[model]["fields"].items():
            out.add(name)
            if spec.get("alias"):
                out.add(spec["alias"])
        return out

    def model(self, name: str) -> Any:
        """A validator equivalent to DeepSpeed's pydantic class `name` (built on first use).

        Built straight on pydantic-core, the engine pydantic models compile to, so the lax-mode rules
        and error types are DeepSpeed's own while the lint path skips importing pydantic's model layer
        (about 150 ms of a cold run). `.validate_python(dict)` raises pydantic_core.ValidationError.
        """
        if name not in self._models:
            from pydantic_core import SchemaValidator

            self._models[name] = SchemaValidator(self.core_schema(name))
        return self._models[name]

    def core_schema(self, name: str) -> Any:
        from pydantic_core import core_schema as cs

        spec = self.raw_models[name]
        fields: dict[str, Any] = {}
        for fname, f in spec["fields"].items():
            kinds = f.get("types") or ["any"]
            options: list[Any] = []
            if f.get("enum"):
                e = f["enum"]
                base = int if e.get("base") == "int" else str
                members = enum.Enum(e["name"], {f"V{i}": v for i, v in enumerate(e["values"])}, type=base)
                options.append(cs.enum_schema(members, list(members), sub_type="int" if base is int else "str"))
            else:
                limits = {k: v for k, v in (f.get("constraints") or {}).items() if k in ("ge", "gt", "le", "lt")}
                for kind in kinds:
                    if kind == "null":
                        continue  # wrapped as nullable below, so errors keep the inner schema's location
                    if kind == "model" and f.get("model"):
                        options.append(self.core_schema(f["model"]))
                    elif kind == "int":
                        options.append(cs.int_schema(**limits))
                    elif kind == "float":
                        options.append(cs.float_schema(**limits))
                    elif kind in _SIMPLE_SCHEMAS:
                        options.append(getattr(cs, _SIMPLE_SCHEMAS[kind])())
                    elif kind == "any":
                        options = [cs.any_schema()]
                        break
            nullable = "null" in kinds
            inner = options[0] if len(options) == 1 else cs.union_schema(options) if options else cs.any_schema()
            if nullable and not options:
                inner = cs.none_schema()
            schema = cs.nullable_schema(inner) if nullable and options else inner
            alias = f.get("alias")
            fields[fname] = cs.typed_dict_field(
                schema, required=False, validation_alias=[[alias], [fname]] if alias else None
            )
        return cs.typed_dict_schema(fields, extra_behavior=spec.get("extra", "forbid"))

    def plain_errors(
        self, name: str, value: Any, at: tuple[str, ...] = ()
    ) -> list[tuple[tuple[str, ...], str, str]] | None:
        """`model(name)`'s verdict on `value` when it is plain, without pydantic-core: every value plainly of
        its field's type (a bool for a bool, an int or an integral float within the limits for an int, a
        listed enum value, a str for a str, ...) and unknown keys (pydantic-core's `extra_forbidden`, the
        common mistake) reported as pydantic-core reports them. None means "ask pydantic-core", never
        "invalid": a lint run whose DeepSpeed sections are plain never imports it (about 40 ms of a cold
        start). tests/knowledge/test_ds_fast_path.py holds this against pydantic-core on every field of every model."""
        spec = self.raw_models[name]
        if not isinstance(value, dict):
            return None
        forbid = spec.get("extra", "forbid") == "forbid"
        by_field: dict[str, list[tuple[tuple[str, ...], str, str]]] = {}
        extra: list[tuple[tuple[str, ...], str, str]] = []
        for key, item in value.items():
            fname = self._field_of(name).get(key)
            if fname is None:
                if forbid:
                    extra.append(((*at, key), "extra_forbidden", "Extra inputs are not permitted"))
                continue
            found = self._plain_field(spec["fields"][fname], item, (*at, key))
            if fname in by_field or found is None:
                return None  # a field given twice (name and alias), or a value pydantic-core must judge
            by_field[fname] = found
        nested = [e for fname in spec["fields"] if fname in by_field for e in by_field[fname]]
        return nested + extra

    def _field_of(self, name: str) -> dict[str, str]:
        """Key as written (field name or alias) -> field name, for model `name`."""
        if name not in self._keys:
            keys: dict[str, str] = {}
            for fname, f in self.raw_models[name]["fields"].items():
                keys[fname] = fname
                if f.get("alias"):
                    keys[f["alias"]] = fname
            self._keys[name] = keys
        return self._keys[name]

    def _plain_field(self, f: dict[str, Any], item: Any, at: tuple[str, ...]) -> list | None:
        """[] when `item` is plainly of field `f`'s type, the errors of a nested model, None when unsure."""
        kinds = f.get("types") or ["any"]
        if item is None:
            return [] if "null" in kinds or "any" in kinds else None
        if f.get("enum"):
            base = int if f["enum"].get("base") == "int" else str
            return [] if type(item) is base and item in f["enum"]["values"] else None
        if "any" in kinds:
            return []
        if "model" in kinds and f.get("model") and isinstance(item, dict):
            nested = self.plain_errors(f["model"], item, at)
            only_model = [k for k in kinds if k != "null"] == ["model"]
            return nested if not nested or only_model else None  # in a union, pydantic-core tags the location
        limits = f.get("constraints") or {}
        for kind in kinds:
            if kind in ("int", "float"):
                plain = _plain_number(kind, item, limits)
            else:
                plain = type(item) is _PLAIN_TYPES.get(kind)
            if plain:
                return []
        return None


def _plain_number(kind: str, item: Any, limits: dict[str, Any]) -> bool:
    """An int (or, for an int field, an integral float such as 1e9) within the field's limits."""
    if type(item) not in (int, float) or (type(item) is float and not math.isfinite(item)):
        return False
    if kind == "int" and type(item) is float and not (item.is_integer() and abs(item) <= 2**53):
        return False  # pydantic-core takes an integral float (1e9) for an int, not one past int64
    checks = {"ge": operator.ge, "gt": operator.gt, "le": operator.le, "lt": operator.lt}
    return all(checks[k](item, v) for k, v in limits.items() if k in checks)


_PLAIN_TYPES: dict[str, type] = {"bool": bool, "str": str, "path": str, "dict": dict, "list": list}


# JSON kinds whose schema needs no parameters (pathlib.Path fields take a string from JSON).
_SIMPLE_SCHEMAS = {
    "bool": "bool_schema",
    "str": "str_schema",
    "path": "str_schema",
    "dict": "dict_schema",
    "list": "list_schema",
}


@cache
def deepspeed(version: str = DEEPSPEED_VERSION) -> DeepSpeedSchema:
    return DeepSpeedSchema(_read(f"deepspeed-{version}.json"))


def deepspeed_versions() -> dict[str, DeepSpeedSchema]:
    """Every shipped DeepSpeed snapshot, oldest first (reads them all: for version comparisons only)."""
    return {v: deepspeed(v) for v in shipped_versions("deepspeed")}
