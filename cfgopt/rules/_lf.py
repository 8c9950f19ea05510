"""Shared facts about LLaMA-Factory configs for the LF rules: which field table applies to a source."""

from __future__ import annotations

from cfgopt import schema
from cfgopt.rules.base import Context
from cfgopt.source import Kind, Source

LF = f"LLaMA-Factory {schema.LLAMAFACTORY_VERSION}"


def group_of(source: Source) -> str:
    if source.kind == Kind.LF_CLI:
        return source.command.get("group", "train")
    return "infer" if source.kind == Kind.LF_INFER else "train"


def fields_for(ctx: Context) -> dict[str, schema.FieldSpec]:
    return ctx.settings.lf_schema.group(group_of(ctx.source))


def top_entries(source: Source):
    return list(source.root.entries or []) if source.root is not None else []
