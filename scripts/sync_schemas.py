#!/usr/bin/env python
"""Regenerate cfgopt's versioned schema snapshots from the installed, pinned parsers.

Why this exists: the linter must know every key LLaMA-Factory 0.9.5 and DeepSpeed 0.19.8 accept, with
types, enum choices, defaults and aliases, but the lint path must not import torch/transformers/deepspeed.
So we introspect the real packages once (here) and ship the result as JSON under ``cfgopt/knowledge/schemas``.
Nothing in the snapshots is typed by hand: field lists come from ``dataclasses.fields`` /
pydantic ``model_fields``, DeepSpeed's top-level keys and strict sections come from *running* its config
readers on tracking dicts and probe values, and the HF ``"auto"`` keys come from the AST of the
transformers/accelerate functions that fill them.  That keeps the snapshot honest when the pins move:
``--check`` fails (exit 1) on drift, and a mismatched environment is refused (exit 2).

Usage::

    DISABLE_VERSION_CHECK=1 python scripts/sync_schemas.py [--out-dir cfgopt/knowledge/schemas] [--check]
    # the other supported releases, each from its own venv (docs/versions.md):
    DISABLE_VERSION_CHECK=1 /tmp/venv-ds0164/bin/python scripts/sync_schemas.py --allow-versions [--only deepspeed]

Writing also refreshes ``version-index.json`` (what differs between the shipped snapshots; derived from
them alone, see ``cfgopt.knowledge.versions.build_index``).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import difflib
import enum
import importlib.metadata
import inspect
import json
import math
import os
import pathlib
import sys
import textwrap
import types
import typing
from collections.abc import Callable, Iterable
from typing import Any

# Pinned versions: a snapshot taken from anything else would silently describe the wrong parser.
PINS: dict[str, str] = {"llamafactory": "0.9.5", "transformers": "5.6.0", "deepspeed": "0.19.8"}
LF_FILE = f"llamafactory-{PINS['llamafactory']}.json"
DS_FILE = f"deepspeed-{PINS['deepspeed']}.json"
DEFAULT_OUT_DIR = pathlib.Path(__file__).resolve().parents[1] / "cfgopt" / "knowledge" / "schemas"

# Canonical order of the "kinds" vocabulary so that type lists are stable and easy to read.
KIND_ORDER = ["bool", "int", "float", "str", "dict", "list", "null", "model", "path", "any"]
PROBE_KEY = "__cfgopt_probe__"
# Some readers short-circuit on an empty dict (``if param_dict and KEY in param_dict``): tracing dicts carry
# this inert entry so they are truthy, and the key itself is dropped from the results.
FILLER_KEY = "__cfgopt_filler__"


class VersionMismatch(RuntimeError):
    """Raised when the installed packages are not exactly the pinned ones (snapshot would be wrong)."""


# --------------------------------------------------------------------------------------------------
# generic helpers
# --------------------------------------------------------------------------------------------------


def check_versions() -> dict[str, str]:
    """Return installed versions of the pinned packages, raising if any differs from its pin."""
    found: dict[str, str] = {}
    problems: list[str] = []
    for pkg, want in PINS.items():
        try:
            have = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            problems.append(f"{pkg}: not installed (need =={want})")
            continue
        found[pkg] = have
        if have != want:
            problems.append(f"{pkg}: installed {have}, pinned {want}")
    if problems:
        raise VersionMismatch("; ".join(problems))
    return found


def sort_kinds(kinds: Iterable[str]) -> list[str]:
    """Deduplicate and order kinds canonically so the output does not depend on annotation order."""
    uniq = set(kinds)
    return [k for k in KIND_ORDER if k in uniq] + sorted(uniq - set(KIND_ORDER))


def value_kind(value: Any) -> str:
    """Map a Python value (enum/literal member value) to a kind name."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, dict):
        return "dict"
    if isinstance(value, list | tuple):
        return "list"
    return "any"


def jsonable(value: Any) -> Any:
    """Turn a default value into plain JSON; anything exotic becomes its ``str()`` (documented contract)."""
    if isinstance(value, enum.Enum):
        return jsonable(value.value)
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return int(value)  # drops int subclasses such as DeepSpeed's pp_int
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((jsonable(v) for v in value), key=repr)
    if isinstance(value, pathlib.PurePath):
        return str(value)
    if callable(getattr(value, "model_dump", None)):  # nested pydantic default instance
        return jsonable(value.model_dump())
    return str(value)


def union_args(tp: Any) -> tuple[Any, ...] | None:
    """Return the members of a ``Union``/``X | Y`` annotation, or None when it is not a union."""
    origin = typing.get_origin(tp)
    if origin is typing.Union or origin is types.UnionType:
        return typing.get_args(tp)
    return None


def is_enum_type(tp: Any) -> bool:
    """True for Enum subclasses (they carry the choices we want to record)."""
    return isinstance(tp, type) and issubclass(tp, enum.Enum)


def enum_values(tp: type[enum.Enum]) -> list[Any]:
    """Enum member values in declaration order (aliases excluded, as argparse/pydantic see them)."""
    return [jsonable(m.value) for m in tp]


def dump(doc: dict[str, Any]) -> str:
    """Serialise deterministically: sorted keys, indent 1, trailing newline."""
    return json.dumps(doc, sort_keys=True, indent=1, ensure_ascii=False, allow_nan=False) + "\n"


# --------------------------------------------------------------------------------------------------
# LLaMA-Factory
# --------------------------------------------------------------------------------------------------


def lf_kinds(tp: Any) -> list[str]:
    """Base kinds admitted by a dataclass annotation (LLaMA-Factory flavour: Path is given as a str)."""
    if tp is type(None) or tp is None:
        return ["null"]
    members = union_args(tp)
    if members is not None:
        out: list[str] = []
        for m in members:
            out.extend(lf_kinds(m))
        return out
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        return [value_kind(v) for v in typing.get_args(tp)]
    if origin is typing.Annotated:
        return lf_kinds(typing.get_args(tp)[0])
    if is_enum_type(tp):
        return [value_kind(v) for v in enum_values(tp)]
    base = origin or tp
    simple = {
        bool: "bool",
        int: "int",
        float: "float",
        str: "str",
        dict: "dict",
        list: "list",
        tuple: "list",
        set: "list",
    }
    if isinstance(base, type):
        for py, kind in simple.items():
            if base is py:
                return [kind]
        if issubclass(base, pathlib.PurePath):
            return ["str"]
        if issubclass(base, dict):
            return ["dict"]
        if issubclass(base, list | tuple):
            return ["list"]
    return ["any"]


def lf_choices(tp: Any, metadata: Any) -> tuple[list[Any] | None, str | None, list[Any] | None]:
    """Return (choices, choices_kind, item_choices) for one dataclass field.

    * ``Enum`` / ``Optional[Enum]`` and ``Union[Enum, str]`` (HF converts the str with ``Enum(value)`` in
      ``TrainingArguments.__post_init__``, so a bad string is a parse-time ValueError) -> kind "enum".
    * ``Literal`` / ``Optional[Literal]`` -> kind "literal".
    * ``metadata["choices"]`` (HF log_level, ddp_backend, ...): only argparse enforces these -> "argparse".
    * ``list[Enum]`` members (fsdp, debug: space-separated option strings) -> ``item_choices``.
    """
    members = [m for m in (union_args(tp) or (tp,)) if m is not type(None)]
    enums = [m for m in members if is_enum_type(m)]
    literals = [m for m in members if typing.get_origin(m) is typing.Literal]
    others = [m for m in members if m not in enums and m not in literals]
    item_choices: list[Any] | None = None
    for m in members:
        if typing.get_origin(m) is list and typing.get_args(m) and is_enum_type(typing.get_args(m)[0]):
            item_choices = enum_values(typing.get_args(m)[0])
    if len(enums) == 1 and not literals and all(o is str for o in others):
        return enum_values(enums[0]), "enum", item_choices
    if literals and not enums and not others:
        vals: list[Any] = []
        for lit in literals:
            vals.extend(jsonable(v) for v in typing.get_args(lit))
        return vals, "literal", item_choices
    if isinstance(metadata, typing.Mapping) and "choices" in metadata:
        return [jsonable(v) for v in metadata["choices"]], "argparse", item_choices
    return None, None, item_choices


def lf_default(f: dataclasses.Field) -> tuple[Any, bool]:
    """Return (JSON default, required) — default_factory is called, MISSING means required."""
    if f.default is not dataclasses.MISSING:
        return jsonable(f.default), False
    if f.default_factory is not dataclasses.MISSING:
        return jsonable(f.default_factory()), False
    return None, True


def build_llamafactory(versions: dict[str, str]) -> dict[str, Any]:
    """Introspect LLaMA-Factory's argument dataclasses (plus HF Seq2SeqTrainingArguments via subclassing)."""
    os.environ.setdefault("DISABLE_VERSION_CHECK", "1")
    from llamafactory.hparams import parser as lf_parser

    groups_src = {"train": "_TRAIN_ARGS", "infer": "_INFER_ARGS", "eval": "_EVAL_ARGS"}
    groups: dict[str, list[str]] = {}
    classes: list[type] = []
    for group, attr in groups_src.items():
        seq = getattr(lf_parser, attr, None)
        if seq is None:
            continue
        groups[group] = [cls.__name__ for cls in seq]
        classes.extend(cls for cls in seq if cls not in classes)

    fields: dict[str, dict[str, Any]] = {}
    not_settable: set[str] = set()
    for cls in classes:
        hints = typing.get_type_hints(cls, include_extras=True)
        for f in dataclasses.fields(cls):
            if not f.init:
                not_settable.add(f.name)
                continue
            tp = hints.get(f.name, f.type)
            choices, choices_kind, item_choices = lf_choices(tp, f.metadata)
            default, required = lf_default(f)
            entry = {
                "types": sort_kinds(lf_kinds(tp)),
                "choices": choices,
                "choices_kind": choices_kind,
                "item_choices": item_choices,
                "default": default,
                "required": required,
                "help": str(f.metadata.get("help", "")) if f.metadata else "",
            }
            if f.name in fields:
                prev = fields[f.name]
                prev["dataclasses"].append(cls.__name__)
                diff = {k for k in entry if entry[k] != prev[k] and k != "help"}
                if diff:  # same key, different meaning per dataclass: keep the first, say so loudly
                    print(
                        f"warning: field {f.name!r} differs between {prev['dataclasses']} in {sorted(diff)}",
                        file=sys.stderr,
                    )
                continue
            fields[f.name] = {"dataclasses": [cls.__name__], **entry}
    return {
        "package": "llamafactory",
        "version": versions["llamafactory"],
        "transformers": versions["transformers"],
        "groups": groups,
        "fields": fields,
        "not_settable": sorted(not_settable - set(fields)),
        "templates": installed_templates(),
        "report_to": report_to_values(),
    }


def report_to_values() -> dict[str, Any]:
    """What `report_to` may hold for the installed transformers' Trainer (LLaMA-Factory passes it on unchecked).

    `integrations`: the names `get_reporting_integration_callbacks` accepts (its `INTEGRATION_TO_CALLBACK`),
    checked when the Trainer is built, after data and model loading; `words`: the whole-value words
    TrainingArguments turns into a list first (`none`, `all`); `null`: whether a null gets through (transformers 4
    reads it as `all`, transformers 5 as `[None]`). Each word and the null are run through TrainingArguments and
    that check, not read.
    """
    import tempfile

    from transformers import TrainingArguments
    from transformers.integrations import integration_utils

    def accepted(value: Any) -> bool:
        with tempfile.TemporaryDirectory() as out:
            args = TrainingArguments(output_dir=out, report_to=value)
        try:
            integration_utils.get_reporting_integration_callbacks(args.report_to)
        except ValueError:
            return False
        return True

    return {
        "integrations": list(integration_utils.INTEGRATION_TO_CALLBACK),
        "words": [word for word in ("none", "all") if accepted(word)],
        "null": accepted(None),
    }


def templates_in_source(template_py: str) -> list[str]:
    """Chat-template names a LLaMA-Factory `data/template.py` registers, read from its AST.

    Every template is a top-level `register_template(name="...", ...)` call (`_register_template` up to
    0.9.1) filling `TEMPLATES`, the dict
    `get_template_and_fix_tokenizer` looks names up in (`Template X does not exist.`). Reading the source
    works for any release without installing it (LLaMA-Factory 0.9.4 caps transformers below 5.6.0).
    """
    names: set[str] = set()
    for node in ast.walk(ast.parse(template_py)):
        if not (
            isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("register_template", "_register_template")
        ):
            continue
        arg = next((kw.value for kw in node.keywords if kw.arg == "name"), node.args[0] if node.args else None)
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            names.add(arg.value)
    return sorted(names)


def installed_templates() -> list[str]:
    """The installed LLaMA-Factory's registry, read from its `data/template.py` (importing that module needs
    torchaudio through the multimodal plugins, which a CPU host may lack; the names are literal strings)."""
    import importlib.util

    spec = importlib.util.find_spec("llamafactory")
    if spec is None or not spec.submodule_search_locations:
        raise VersionMismatch("llamafactory: not installed")
    template_py = pathlib.Path(spec.submodule_search_locations[0]) / "data" / "template.py"
    return templates_in_source(template_py.read_text(encoding="utf-8"))


def add_templates(snapshot: pathlib.Path, template_py: pathlib.Path) -> str:
    """`--templates-from`: set the `templates` of an existing LLaMA-Factory snapshot from that release's
    `llamafactory/data/template.py` (from its wheel or its git tag)."""
    data = json.loads(snapshot.read_text(encoding="utf-8"))
    data["templates"] = templates_in_source(template_py.read_text(encoding="utf-8"))
    return dump(data)


# --------------------------------------------------------------------------------------------------
# DeepSpeed
# --------------------------------------------------------------------------------------------------


class _TrackingKeys:
    """``dict.keys()`` stand-in that records ``key in d.keys()`` membership tests."""

    def __init__(self, owner: TrackingDict) -> None:
        self._owner = owner

    def __contains__(self, key: object) -> bool:
        self._owner._note(key)
        return dict.__contains__(self._owner, key)

    def __iter__(self) -> typing.Iterator[Any]:
        return iter(dict.keys(self._owner))

    def __len__(self) -> int:
        return dict.__len__(self._owner)


class TrackingDict(dict):
    """A dict that records every key a reader asks about (get, [], in, keys() membership).

    DeepSpeed reads most of its config with ad-hoc ``param_dict.get(KEY, default)`` calls; running its real
    readers on a TrackingDict is the only reliable way to list every key 0.19.8 actually consumes.
    """

    def __init__(self, sink: set[str], prefix: str = "", defaults: dict[str, list[Any]] | None = None) -> None:
        super().__init__({FILLER_KEY: None})
        self._sink = sink
        self._prefix = prefix
        self._defaults = defaults

    def _note(self, key: object) -> None:
        if isinstance(key, str) and key != FILLER_KEY:
            self._sink.add(self._prefix + key)

    def get(self, key: Any, default: Any = None) -> Any:
        self._note(key)
        if self._defaults is not None and isinstance(key, str) and not dict.__contains__(self, key):
            self._defaults.setdefault(self._prefix + key, []).append(default)  # what the reader falls back to
        return super().get(key, default)

    def __getitem__(self, key: Any) -> Any:
        self._note(key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self._note(key)
        return super().__contains__(key)

    def keys(self) -> Any:  # type: ignore[override]
        return _TrackingKeys(self)


def _bare_ds_config(param_dict: dict) -> Any:
    """A DeepSpeedConfig shell (no dist, no batch maths) so we can run only ``_initialize_params``."""
    from deepspeed.runtime.config import DeepSpeedConfig

    cfg = object.__new__(DeepSpeedConfig)
    cfg._param_dict = param_dict
    cfg.global_rank = 0
    cfg.world_size = 1
    return cfg


def _run_ds_readers(param_dict: dict) -> None:
    """Run every reader DeepSpeedConfig applies to a user dict (minus removed-key rejection)."""
    cfg = _bare_ds_config(param_dict)
    cfg._initialize_params(param_dict)
    cfg._do_warning_check()


def _keys_read_by_initialize() -> set[str]:
    """String keys ``deepspeed.initialize`` reads from the raw config (``"k" in config``, ``config[...]``)."""
    import deepspeed

    tree = ast.parse(textwrap.dedent(inspect.getsource(deepspeed.initialize)))
    found: set[str] = set()

    def is_config(node: ast.AST) -> bool:
        return isinstance(node, ast.Name) and node.id == "config"

    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Compare)
            and len(node.ops) == 1
            and isinstance(node.ops[0], ast.In)
            and is_config(node.comparators[0])
            and isinstance(node.left, ast.Constant)
        ):
            found.add(node.left.value)
        elif isinstance(node, ast.Subscript) and is_config(node.value) and isinstance(node.slice, ast.Constant):
            found.add(node.slice.value)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and is_config(node.func.value)
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            found.add(node.args[0].value)
    return {k for k in found if isinstance(k, str)}


def ds_top_level_keys(removed: Iterable[str]) -> list[str]:
    """Every top-level key 0.19.8 reads: traced from the real readers plus ``deepspeed.initialize``."""
    sink: set[str] = set()
    _run_ds_readers(TrackingDict(sink))
    keys = (sink | _keys_read_by_initialize()) - set(removed)
    return sorted(keys)


# DeepSpeed before 0.15 builds its config models on pydantic 1 (`deepspeed.pydantic_v1`, i.e. `pydantic.v1`
# under pydantic 2). These helpers read either kind of model the same way, so one introspection serves all
# releases. The snapshot records which one validated the release (`pydantic`), because their lax coercions
# differ (pydantic 1 truncates 3.7 to the int 3; pydantic 2 refuses it).
_EXTRA_FORBIDDEN = {"extra_forbidden", "value_error.extra"}


def _model_bases() -> tuple[type, ...]:
    from pydantic import BaseModel

    try:
        from pydantic.v1 import BaseModel as BaseModelV1
    except ImportError:
        return (BaseModel,)
    return (BaseModel, BaseModelV1)


def _validation_errors() -> tuple[type[Exception], ...]:
    from pydantic import ValidationError

    try:
        from pydantic.v1 import ValidationError as ValidationErrorV1
    except ImportError:
        return (ValidationError,)
    return (ValidationError, ValidationErrorV1)


def _is_v1(model: type) -> bool:
    return not hasattr(model, "model_fields") or "__pydantic_decorators__" not in dir(model)


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, _model_bases())


@dataclasses.dataclass
class FieldView:
    """One pydantic field, read the same way from a pydantic 1 or 2 model."""

    alias: str | None
    annotation: Any
    default: Any
    required: bool
    constraints: dict[str, Any]
    extra: dict[str, Any]


def _constraints(*sources: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for src in sources:
        for attr in ("ge", "gt", "le", "lt"):
            val = getattr(src, attr, None)
            if val is not None and not callable(val):
                out[attr] = jsonable(val)
    return out


def field_views(model: type) -> dict[str, FieldView]:
    """Field name -> FieldView for a DeepSpeed config model of either pydantic generation."""
    if _is_v1(model):
        out: dict[str, FieldView] = {}
        for name, f in model.__fields__.items():
            if f.default_factory is not None:
                default = jsonable(f.default_factory())
            else:
                default = None if f.required else jsonable(f.default)
            out[name] = FieldView(
                alias=f.alias if f.has_alias else None,
                annotation=f.annotation,
                default=default,
                required=bool(f.required),
                constraints=_constraints(f.field_info, f.outer_type_),
                extra=dict(f.field_info.extra),
            )
        return out
    from pydantic_core import PydanticUndefined

    views: dict[str, FieldView] = {}
    for name, fi in model.model_fields.items():
        if fi.default is not PydanticUndefined:
            default = jsonable(fi.default)
        elif fi.default_factory is not None:
            default = jsonable(fi.default_factory())  # type: ignore[call-arg]
        else:
            default = None
        views[name] = FieldView(
            alias=fi.alias,
            annotation=fi.annotation,
            default=default,
            required=fi.is_required(),
            constraints=_constraints(*fi.metadata),
            extra=fi.json_schema_extra if isinstance(fi.json_schema_extra, dict) else {},
        )
    return views


def model_validators(model: type) -> dict[str, Any]:
    """Names of a model's validators: {"field": {name: [fields]}, "model": [names]}."""
    if _is_v1(model):
        by_name: dict[str, list[str]] = {}
        for field, validators in model.__validators__.items():
            for v in validators:
                by_name.setdefault(v.func.__name__, []).append(field)
        roots = [f for f in model.__pre_root_validators__] + [f for _, f in model.__post_root_validators__]
        return {"field": dict(sorted(by_name.items())), "model": sorted(f.__name__ for f in roots)}
    decorators = model.__pydantic_decorators__
    return {
        "field": {name: list(dec.info.fields) for name, dec in sorted(decorators.field_validators.items())},
        "model": sorted(decorators.model_validators),
    }


def model_extra(model: type) -> str:
    if _is_v1(model):
        extra = getattr(model.__config__, "extra", None)
        return str(getattr(extra, "value", extra) or "ignore")
    return model.model_config.get("extra") or "ignore"


def _all_ds_models() -> dict[str, type]:
    """Name -> class for every DeepSpeedConfigModel subclass currently imported."""
    from deepspeed.runtime.config_utils import DeepSpeedConfigModel

    out: dict[str, type] = {}
    stack = list(DeepSpeedConfigModel.__subclasses__())
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        out.setdefault(cls.__name__, cls)
    return out


def _nested_model(model: type, loc: tuple[Any, ...]) -> type | None:
    """Follow a pydantic error location (field names or aliases) down nested model annotations."""
    cur: type | None = model
    for part in loc:
        if cur is None or not isinstance(part, str):
            return None
        views = field_views(cur)
        by_name = dict(views)
        by_name.update({fi.alias: fi for fi in views.values() if fi.alias})
        fi = by_name.get(part)
        if fi is None:
            return None
        nxt = None
        for m in union_args(fi.annotation) or (fi.annotation,):
            if _is_model(m):
                nxt = m
        cur = nxt
    return cur


def _probe_section(param_dict: dict, models: dict[str, type]) -> type | None:
    """Run the readers on a dict holding one unknown key; the model that rejects it is the strict section."""
    try:
        _run_ds_readers(param_dict)
    except _validation_errors() as exc:
        for err in exc.errors():
            loc = tuple(err.get("loc", ()))
            if err.get("type") in _EXTRA_FORBIDDEN and loc and loc[-1] == PROBE_KEY:
                title = getattr(exc, "title", None) or getattr(getattr(exc, "model", None), "__name__", None)
                outer = models.get(title)
                return _nested_model(outer, loc[:-1]) if outer is not None else None
        return None
    except Exception:  # noqa: BLE001 - a scalar key fed a dict may crash any way; that means "not strict"
        return None
    return None


@contextlib.contextmanager
def _v1_root_validators_skip_on_failure(models: dict[str, type]) -> typing.Iterator[None]:
    """While probing: pydantic 1 runs root validators even after a field failed, and DeepSpeed 0.14's
    (monitor `check_enabled`, ...) then crash on the missing value (AttributeError) before the
    ValidationError that names the unknown key is raised. The run fails either way; the probe needs the
    ValidationError, so root validators skip on failure meanwhile (restored after)."""
    saved = {cls: cls.__post_root_validators__ for cls in models.values() if _is_v1(cls)}
    try:
        for cls, validators in saved.items():
            cls.__post_root_validators__ = [(True, func) for _, func in validators]
        yield
    finally:
        for cls, validators in saved.items():
            cls.__post_root_validators__ = validators


def ds_sections(top_level: list[str], models: dict[str, type]) -> dict[str, str]:
    with _v1_root_validators_skip_on_failure(models):
        return _ds_sections(top_level, models)


def _ds_sections(top_level: list[str], models: dict[str, type]) -> dict[str, str]:
    """Map each JSON location validated by a pydantic model to that model's class name.

    Top-level keys are probed directly; for keys that are plain dict reads we trace which sub-keys the
    readers touch and probe those too (this is how ``timers.throughput`` shows up).
    """
    sections: dict[str, str] = {}
    for key in top_level:
        found = _probe_section({key: {PROBE_KEY: 1}}, models)
        if found is not None:
            sections[key] = found.__name__
            continue
        sink: set[str] = set()
        try:
            _run_ds_readers({key: TrackingDict(sink, prefix=key + ".")})
        except Exception:  # noqa: BLE001 - scalar key; nothing nested to find
            continue
        for dotted in sorted(sink):
            sub = dotted.split(".", 1)[1]
            found = _probe_section({key: {sub: {PROBE_KEY: 1}}}, models)
            if found is not None:
                sections[dotted] = found.__name__
    return sections


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, bool | int | float | str | enum.Enum)


def ds_plain_reads(top_level: list[str], sections: dict[str, str]) -> tuple[list[str], dict[str, Any]]:
    """Keys DeepSpeed reads outside its pydantic models, and the defaults its readers fall back to.

    Returns (nested dotted keys read inside plain blocks such as 0.16's ``bf16``, {dotted key: default}).
    Defaults come from running the readers on tracking dicts (``param_dict.get(KEY, DEFAULT)`` as
    ``get_scalar_param`` does); a top-level key read without ``.get`` takes its ``runtime/constants.py``
    ``<NAME>_DEFAULT`` (``NAME = "key"``). Strict sections are left out: their defaults are the models'.
    """
    from deepspeed.runtime import constants

    strict_tops = {dotted.split(".", 1)[0] for dotted in sections}
    traced: dict[str, list[Any]] = {}
    _run_ds_readers(TrackingDict(set(), defaults=traced))
    nested: set[str] = set()
    for key in top_level:
        if key in strict_tops:
            continue
        # Blocks read most keys only when switched on (fp16 loss scaling, ...): trace off and on.
        for enabled in (False, True):
            sink: set[str] = set()
            block = TrackingDict(sink, prefix=key + ".", defaults=traced)
            if enabled:
                dict.__setitem__(block, "enabled", True)
            # a scalar key fed a dict, or a block that needs more, fails somewhere: keep what was read until then
            with contextlib.suppress(Exception):
                _run_ds_readers({key: block})
            nested |= {dotted for dotted in sink if dotted not in sections}
    defaults: dict[str, Any] = {}
    for dotted, seen in traced.items():
        top = dotted.split(".", 1)[0]
        if top not in top_level or top in strict_tops or dotted in sections:
            continue
        if not all(_scalar(v) for v in seen):
            continue  # a block read as `.get(KEY, {})`: its keys are traced one level down
        values = {json.dumps(jsonable(v), sort_keys=True) for v in seen}
        if len(values) == 1:
            defaults[dotted] = jsonable(seen[0])
        else:  # two readers, two fallbacks: no single default to record
            print(f"note: readers disagree on the default of {dotted!r}: {sorted(values)}", file=sys.stderr)
    names = vars(constants)
    for name, key in sorted(names.items()):
        if not (isinstance(key, str) and f"{name}_DEFAULT" in names and key in top_level):
            continue
        if key in strict_tops or key in defaults or key in traced:
            continue
        value = names[f"{name}_DEFAULT"]
        if _scalar(value):
            defaults[key] = jsonable(value)
    return sorted(nested), dict(sorted(defaults.items()))


def ds_kinds(tp: Any) -> tuple[list[str], type | None, type | None]:
    """Return (kinds, nested pydantic model, enum class) for a pydantic field annotation."""
    if tp is type(None) or tp is None:
        return ["null"], None, None
    members = union_args(tp)
    if members is not None:
        kinds: list[str] = []
        model = enum_cls = None
        for m in members:
            k, mm, ee = ds_kinds(m)
            kinds.extend(k)
            model = model or mm
            enum_cls = enum_cls or ee
        return kinds, model, enum_cls
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return ds_kinds(typing.get_args(tp)[0])
    if origin is typing.Literal:
        return [value_kind(v) for v in typing.get_args(tp)], None, None
    if tp is typing.Any or tp is object:
        return ["any"], None, None
    if is_enum_type(tp):
        return [value_kind(v) for v in enum_values(tp)], None, tp
    base = origin or tp
    if isinstance(base, type):
        if _is_model(base):
            return ["model"], base, None
        if issubclass(base, pathlib.PurePath):
            return ["path"], None, None
        for py, kind in ((bool, "bool"), (int, "int"), (float, "float"), (str, "str")):
            if base is py:
                return [kind], None, None
        for py, kind in ((bool, "bool"), (int, "int"), (float, "float"), (str, "str")):
            if issubclass(base, py):  # pydantic 1 constrained types (conint -> ConstrainedIntValue)
                return [kind], None, None
        if issubclass(base, dict):
            return ["dict"], None, None
        if issubclass(base, list | tuple | set | frozenset):
            return ["list"], None, None
    return ["any"], None, None


def _enum_info(enum_cls: type[enum.Enum]) -> dict[str, Any]:
    """Name, value base and values of an enum field (DeepSpeed models use ``use_enum_values``)."""
    if issubclass(enum_cls, bool):
        base = "bool"
    elif issubclass(enum_cls, int):
        base = "int"
    elif issubclass(enum_cls, str):
        base = "str"
    else:
        kinds = sort_kinds(value_kind(v) for v in enum_values(enum_cls))
        base = kinds[0] if len(kinds) == 1 else "any"
    return {"name": enum_cls.__name__, "base": base, "values": enum_values(enum_cls)}


def ds_model_entry(model: type, queue: list[type]) -> dict[str, Any]:
    """Describe one pydantic model; nested models are appended to ``queue`` for the caller to visit."""
    fields: dict[str, Any] = {}
    for name, fi in field_views(model).items():
        kinds, nested, enum_cls = ds_kinds(fi.annotation)
        if nested is not None:
            queue.append(nested)
        extra = fi.extra
        deprecated = bool(extra.get("deprecated", False))
        fields[name] = {
            "alias": fi.alias,
            "types": sort_kinds(kinds),
            "model": nested.__name__ if nested is not None else None,
            "enum": _enum_info(enum_cls) if enum_cls is not None else None,
            "default": fi.default,
            "required": fi.required,
            "constraints": fi.constraints,
            "deprecated": deprecated,
            "new_param": (extra.get("new_param") or None) if deprecated else None,
            # False means DeepSpeed warns but does NOT copy the value to new_param (a fixer must not either).
            "set_new_param": bool(extra.get("set_new_param", True)) if deprecated else None,
        }
    # Validators are code, not data: record their names so cfgopt's own implementations
    # (cfgopt/knowledge/schema_validators.py) can be checked for completeness against them.
    return {"extra": model_extra(model), "fields": fields, "validators": model_validators(model)}


def _ast_string_keys(func: Callable[..., Any], pred: Callable[[ast.AST], Iterable[str]]) -> set[str]:
    """Apply ``pred`` to every AST node of ``func``'s source and collect the strings it yields."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    out: set[str] = set()
    for node in ast.walk(tree):
        out.update(pred(node))
    return out


def _fill_calls(node: ast.AST) -> Iterable[str]:
    """First string argument of ``self.fill_match(...)`` / ``self.fill_only(...)`` calls."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in {"fill_match", "fill_only"}
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):
        yield node.args[0].value


def _config_kwargs_keys(node: ast.AST) -> Iterable[str]:
    """Keys put into accelerate's ``config_kwargs`` (dict literal, ``[...] =`` and ``.update({...})``)."""

    def dict_keys(d: ast.AST) -> Iterable[str]:
        if isinstance(d, ast.Dict):
            for k in d.keys:
                if isinstance(k, ast.Constant) and isinstance(k.value, str):
                    yield k.value

    if isinstance(node, ast.Assign):
        for tgt in node.targets:
            if isinstance(tgt, ast.Name) and tgt.id == "config_kwargs":
                yield from dict_keys(node.value)
            if (
                isinstance(tgt, ast.Subscript)
                and isinstance(tgt.value, ast.Name)
                and tgt.value.id == "config_kwargs"
                and isinstance(tgt.slice, ast.Constant)
            ):
                yield tgt.slice.value
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "update"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "config_kwargs"
        and node.args
    ):
        yield from dict_keys(node.args[0])


def hf_auto_keys() -> dict[str, list[str]]:
    """Dotted DS keys whose ``"auto"`` the HF Trainer + accelerate resolve, with where each is filled.

    Under the Trainer, accelerate's ``_prepare_deepspeed`` finally walks the whole config and raises for any
    ``"auto"`` not in its kwargs, so this union is the complete set of legal ``"auto"`` locations.
    """
    from accelerate import Accelerator
    from accelerate.utils.dataclasses import DeepSpeedPlugin
    from transformers.integrations.deepspeed import HfTrainerDeepSpeedConfig

    sources = {
        "transformers.HfTrainerDeepSpeedConfig.trainer_config_process": _ast_string_keys(
            HfTrainerDeepSpeedConfig.trainer_config_process, _fill_calls
        ),
        "transformers.HfTrainerDeepSpeedConfig.trainer_config_finalize": _ast_string_keys(
            HfTrainerDeepSpeedConfig.trainer_config_finalize, _fill_calls
        ),
        "accelerate.Accelerator._prepare_deepspeed": _ast_string_keys(
            Accelerator._prepare_deepspeed, _config_kwargs_keys
        ),
        "accelerate.DeepSpeedPlugin.set_mixed_precision": _ast_string_keys(
            DeepSpeedPlugin.set_mixed_precision, _fill_calls
        ),
    }
    by_key: dict[str, list[str]] = {}
    for src, keys in sources.items():
        for key in keys:
            by_key.setdefault(key, []).append(src)
    return {k: sorted(v) for k, v in sorted(by_key.items())}


def self_check_deepspeed() -> None:
    """Fail fast if the assumption 'DeepSpeedZeroConfig forbids unknown keys' no longer holds."""
    from deepspeed.runtime.zero.config import DeepSpeedZeroConfig

    try:
        DeepSpeedZeroConfig(**{"stage": 3, "stage3_parition_grads": True})
    except _validation_errors() as exc:
        if any(e.get("type") in _EXTRA_FORBIDDEN for e in exc.errors()):
            return
        raise
    raise AssertionError("DeepSpeedZeroConfig accepted an unknown key; strictness assumption is broken")


def build_deepspeed(versions: dict[str, str]) -> dict[str, Any]:
    """Introspect DeepSpeed 0.19.8's config readers and pydantic models."""
    import accelerate
    from deepspeed.runtime import config as ds_config

    self_check_deepspeed()
    # Rejection of removed blocks arrived in 0.19.x; older releases have no such tables (nothing removed).
    removed_top = {k: str(v) for k, v in getattr(ds_config, "_REMOVED_TOP_LEVEL_CONFIG_KEYS", {}).items()}
    removed_zero = {k: str(v) for k, v in getattr(ds_config, "_REMOVED_ZERO_CONFIG_KEYS", {}).items()}
    top_level = ds_top_level_keys(removed_top)
    all_models = _all_ds_models()
    sections = ds_sections(top_level, all_models)
    plain_reads, plain_defaults = ds_plain_reads(top_level, sections)

    models: dict[str, Any] = {}
    seen: dict[str, type] = {}
    queue: list[type] = [all_models[name] for name in sorted(set(sections.values()))]
    while queue:
        model = queue.pop(0)
        if model.__name__ in seen:
            if seen[model.__name__] is not model:
                raise RuntimeError(f"two different DeepSpeed models named {model.__name__}")
            continue
        seen[model.__name__] = model
        models[model.__name__] = ds_model_entry(model, queue)

    auto = hf_auto_keys()
    return {
        "package": "deepspeed",
        "version": versions["deepspeed"],
        # hf_auto_keys come from these two; recorded so drift in either shows up in --check.
        "transformers": versions["transformers"],
        "accelerate": accelerate.__version__,
        # validated by pydantic 1 (DeepSpeed < 0.15): its lax coercions differ; absent = pydantic 2
        **({"pydantic": 1} if _is_v1(all_models["DeepSpeedZeroConfig"]) else {}),
        "models": models,
        "sections": sections,
        "top_level_keys": top_level,
        "removed_top_level": removed_top,
        "removed_zero": removed_zero,
        "plain_reads": plain_reads,
        "plain_defaults": plain_defaults,
        "hf_auto_keys": list(auto),
        "hf_auto_sources": auto,
    }


# --------------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------------


def render_all() -> dict[str, str]:
    """Build both snapshots and return ``{file name: serialized text}``."""
    versions = check_versions()
    return {
        LF_FILE: dump(build_llamafactory(versions)),
        DS_FILE: dump(build_deepspeed(versions)),
    }


def installed_versions() -> dict[str, str]:
    """Installed versions of the pinned packages, whatever they are (``--allow-versions``); absent ones left out."""
    found: dict[str, str] = {}
    for pkg in PINS:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            found[pkg] = importlib.metadata.version(pkg)
    return found


def render_installed(packages: Iterable[str] = ("llamafactory", "deepspeed")) -> dict[str, str]:
    """``--allow-versions``: snapshot whichever of ``packages`` is installed, at its installed version.

    For the other supported releases (LLaMA-Factory 0.9.4, DeepSpeed 0.16.x / 0.17.x, ...), each in its own
    venv. The introspection is the same as for the pins; the file is named after the installed version and
    records the transformers (and accelerate) it was taken with. Raises VersionMismatch when none is installed.
    """
    versions = installed_versions()
    if "transformers" not in versions:
        raise VersionMismatch("transformers: not installed (needed by both snapshots)")
    out: dict[str, str] = {}
    for pkg, build in (("llamafactory", build_llamafactory), ("deepspeed", build_deepspeed)):
        if pkg not in packages:
            continue
        if pkg not in versions:
            print(f"sync_schemas: {pkg} is not installed here; no {pkg} snapshot", file=sys.stderr)
            continue
        out[f"{pkg}-{versions[pkg]}.json"] = dump(build(versions))
    if not out:
        raise VersionMismatch(f"none of {sorted(packages)} is installed")
    return out


def write_index(out_dir: pathlib.Path) -> pathlib.Path:
    """Rewrite ``version-index.json`` (what differs between the snapshots in ``out_dir``) and ``ds-keys.json``
    (the keys each DeepSpeed snapshot reads, for the history of an unknown key)."""
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
    from cfgopt.knowledge.versions import INDEX_FILE, KEYS_FILE, build_ds_keys, build_index

    (out_dir / KEYS_FILE).write_text(dump(build_ds_keys(out_dir)), encoding="utf-8")
    path = out_dir / INDEX_FILE
    path.write_text(dump(build_index(out_dir)), encoding="utf-8")
    return path


def drift_summary(name: str, old: str, new: str, limit: int = 30) -> str:
    """A short human summary of how a shipped snapshot differs from the regenerated one."""
    diff = list(
        difflib.unified_diff(old.splitlines(), new.splitlines(), f"shipped/{name}", f"fresh/{name}", lineterm="", n=0)
    )
    changed = sum(1 for line in diff if line[:1] in "+-" and line[:3] not in ("+++", "---"))
    head = "\n".join(diff[:limit])
    more = f"\n... ({len(diff) - limit} more diff lines)" if len(diff) > limit else ""
    return f"{name}: {changed} changed lines\n{head}{more}"


def main(argv: list[str] | None = None) -> int:
    """Entry point: write the snapshots, or with ``--check`` only compare (exit 1 on drift)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    ap.add_argument("--out-dir", type=pathlib.Path, default=DEFAULT_OUT_DIR)
    ap.add_argument("--check", action="store_true", help="do not write; exit 1 if shipped files differ")
    ap.add_argument(
        "--allow-versions",
        action="store_true",
        help="snapshot whichever llamafactory / deepspeed version is installed (not only the pins), "
        "as <package>-<installed version>.json",
    )
    ap.add_argument(
        "--only",
        choices=("llamafactory", "deepspeed"),
        action="append",
        help="with --allow-versions: only this package (repeatable; default: every installed one)",
    )
    ap.add_argument(
        "--templates-from",
        nargs=2,
        metavar=("VERSION", "TEMPLATE_PY"),
        help="only set the chat-template registry of llamafactory-VERSION.json from that release's "
        "llamafactory/data/template.py",
    )
    args = ap.parse_args(argv)

    if args.templates_from:
        version, template_py = args.templates_from
        snapshot = args.out_dir / f"llamafactory-{version}.json"
        snapshot.write_text(add_templates(snapshot, pathlib.Path(template_py)), encoding="utf-8")
        print(f"wrote {snapshot}")
        return 0

    try:
        rendered = render_installed(args.only or ("llamafactory", "deepspeed")) if args.allow_versions else render_all()
    except VersionMismatch as exc:
        what = "nothing to snapshot" if args.allow_versions else "installed versions are not the pins"
        print(f"sync_schemas: refusing to snapshot, {what}: {exc}", file=sys.stderr)
        return 2

    out_dir: pathlib.Path = args.out_dir
    if args.check:
        problems = []
        for name, text in rendered.items():
            path = out_dir / name
            if not path.exists():
                problems.append(f"{name}: missing from {out_dir}")
                continue
            old = path.read_text(encoding="utf-8")
            if old != text:
                problems.append(drift_summary(name, old, text))
        if problems:
            print(
                "sync_schemas: schema drift detected (run scripts/sync_schemas.py to update):\n" + "\n".join(problems),
                file=sys.stderr,
            )
            return 1
        print("sync_schemas: shipped schemas are up to date")
        return 0

    out_dir.mkdir(parents=True, exist_ok=True)
    for name, text in rendered.items():
        (out_dir / name).write_text(text, encoding="utf-8")
        print(f"wrote {out_dir / name}")
    print(f"wrote {write_index(out_dir)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
