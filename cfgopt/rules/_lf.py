"""Shared facts about LLaMA-Factory configs for the LF rules: which field table applies to a source."""

from __future__ import annotations

from cfgopt import schema
from cfgopt.source import Kind, Source

LF = f"LLaMA-Factory {schema.LLAMAFACTORY_VERSION}"


def group_of(source: Source) -> str:
    if source.kind == Kind.LF_CLI:
        return source.command.get("group", "train")
    return "infer" if source.kind == Kind.LF_INFER else "train"


def fields_for(source: Source) -> dict[str, schema.FieldSpec]:
    return schema.llamafactory().group(group_of(source))


def top_entries(source: Source):
    return list(source.root.entries or []) if source.root is not None else []
