from __future__ import annotations

import json
from collections.abc import Iterator

from cfgopt.knowledge import schema, versions
from cfgopt.loaders import edits
from cfgopt.rules.base import Context, Rule
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Entry, Kind, Node

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# What a value means, where the number alone does not say it (wording only; the defaults are the snapshots').
MEANING = {
    "gradient_clipping": {0.0: "no clipping"},
    "pin_memory": {True: "pinned host buffers", False: "pageable host buffers"},
    "check_grad_overflow": {True: "steps with inf/nan gradients are skipped", False: "no overflow check"},
}
# Defaults that changed without changing the run (how often DeepSpeed logs): never worth a finding.
NO_EFFECT = {"steps_per_print"}


def compared_releases(ctx: Context) -> tuple[tuple[str, ...], str]:
    """The DeepSpeed releases whose defaults DS090 compares, and how to name them in a message.

    The releases the user's project allows (a `deepspeed-version` range, or the repository's dependency
    pins: requirements*.txt, pyproject.toml, uv.lock, ...) when they are more than one; every shipped
    snapshot when DS090 itself is selected (`--select DS090`, `extend-select`); otherwise none: a drift
    between releases the user may never run is not worth a warning by default.
    """
    settings = ctx.settings
    rng = settings.deepspeed_range
    if rng is not None and not rng.exact:  # an exact pin reaches one release: nothing drifts
        reached = rng.shipped()
        if len(reached) > 1:
            return reached, f"the releases {rng.origin} allows (DeepSpeed {rng.spec})"
    if settings.named(ChangedDefault.code):
        return schema.shipped_versions("deepspeed"), "the shipped snapshots"
    return (), ""


class ChangedDefault(Rule):
    code = "DS090"
    name = "version-changed-default"
    severity = Severity.WARNING
    kinds = frozenset({Kind.DEEPSPEED})
    summary = "The config relies on a DeepSpeed default that differs between releases: same JSON, other run"
    why = (
        "DeepSpeed changed several defaults between the releases users run side by side (LLaMA-Factory 0.9.4 "
        "caps DeepSpeed at 0.16.9, 0.9.5 at 0.18.4, clusters ship 0.19): `gradient_clipping` 0.0 (no clipping) -> "
        "1.0 in 0.19.3, offload `pin_memory` false -> true in 0.19.5, `bf16.check_grad_overflow` false -> true. A "
        "config that leaves such a key out trains differently depending on the installed DeepSpeed, without a "
        "word in the log. The keys and defaults come from the shipped snapshots (`cfgopt/knowledge/schemas/`, compared "
        "in "
        "`version-index.json`), not from a list in this rule; a key is reported only where it takes effect (its "
        "block is present and not switched off). By default it compares only the releases the project allows "
        "(a `deepspeed-version` range in the project config, or the repository's own dependency pins: "
        "requirements*.txt, pyproject.toml, uv.lock, poetry.lock, setup.py, setup.cfg, environment.yml); with none "
        "stated, or an exact pin, "
        "it is quiet unless selected by name (`--extend-select DS090`), which compares every shipped release."
    )
    fails_when = "Never: the run starts; it clips, pins or skips steps differently from the same JSON elsewhere."
    evidence = (
        "deepspeed 0.16.4 / 0.17.6 runtime/constants.py `GRADIENT_CLIPPING_DEFAULT = 0.`; 0.19.8: `1.0` (PR #8068)",
        "deepspeed 0.19.8 runtime/zero/offload_config.py `pin_memory: bool = True` (PR #8207; False in 0.17.6)",
        "deepspeed 0.19.8 runtime/precision_config.py `DeepSpeedBF16Config.check_grad_overflow = True` "
        "(PR #8035; False in 0.17.6, no such key in 0.16.4)",
        "knowledge: docs/evidence/deepspeed.md §1.7 (version drift that changes the meaning of the same JSON)",
    )
    example = '{"train_micro_batch_size_per_gpu": 4}   ->  add "gradient_clipping": 1.0 (or 0.0: what you meant)'
    fix_safety = (
        "Unsafe: writing the selected release's default keeps this release's behaviour, but whether the config "
        "was written for that behaviour or for an older release's is the author's call."
    )

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        ds = ctx.settings.ds_schema
        root = src.root
        if root is None or not root.is_mapping or not root.entries:
            return
        releases, which = compared_releases(ctx)
        for dotted, every in sorted(versions.ds_changed_defaults(ds.version).items()):
            seen = {v: d for v, d in every.items() if v in releases or v == ds.version}
            if dotted in NO_EFFECT or all(d == seen[ds.version] for d in seen.values()):
                continue
            parts = dotted.split(".")
            parent_entry, parent = None, root
            blocks: list[tuple[str, Node]] = []
            for depth, part in enumerate(parts[:-1]):
                found = _get(ds, parent, parts[:depth], part)
                if found is None or not isinstance(found.node.value, dict):
                    break
                parent_entry, parent = found, found.node
                blocks.append((".".join(parts[: depth + 1]), parent))
            else:
                if any(not _block_on(ds, path, node) for path, node in blocks):
                    continue
                if _get(ds, parent, parts[:-1], parts[-1]) is not None:
                    continue
                yield self._report(ctx, ds, dotted, seen, (releases, which), parent_entry, parent)

    def _report(self, ctx, ds, dotted, seen, compared, parent_entry: Entry | None, parent: Node) -> Diagnostic:
        key = dotted.rsplit(".", 1)[-1]
        mine = seen[ds.version]

        def show(value: Any) -> str:
            text = json.dumps(value)
            meaning = MEANING.get(key, {}).get(value)
            return f"{text} ({meaning})" if meaning else text

        by_value: dict[str, list[str]] = {}
        for version, value in seen.items():
            if version != ds.version and value != mine:
                by_value.setdefault(show(value), []).append(version)
        others = "; ".join(f"{text} in {versions.release_spans(vs)}" for text, vs in by_value.items())
        releases, which = compared
        unknown = [v for v in releases if v not in seen]
        missing = f" ({', '.join(unknown)} {'has' if len(unknown) == 1 else 'have'} no such key)" if unknown else ""
        message = (
            f"`{dotted}` is not set, so DeepSpeed's default applies, and it differs between {which}: "
            f"{show(mine)} in DeepSpeed {ds.version}, but {others}{missing}; set it to say which you mean"
        )
        fix = self.fix(
            f"Set `{dotted}` to {json.dumps(mine)} (DeepSpeed {ds.version}'s default)",
            edits.insert_entry(ctx.source, parent_entry, key, mine),
            safe=False,
        )
        if parent_entry is None:
            return self.at_node(ctx, parent, message, key=dotted, fix=fix)
        return self.at_entry(ctx, parent_entry, message, fix=fix)


def _model_at(ds: schema.DeepSpeedSchema, path: list[str]) -> str | None:
    """The pydantic model validating the block at `path` in DeepSpeed `ds` (None: a plain block or the top)."""
    for cut in range(len(path), 0, -1):
        model = ds.sections.get(".".join(path[:cut]))
        if model is None:
            continue
        for part in path[cut:]:
            field = versions._field(ds.raw_models.get(model, {}), part)
            if field is None or not field.get("model"):
                return None
            model = field["model"]
        return model
    return None


def _spellings(ds: schema.DeepSpeedSchema, path: list[str], key: str) -> tuple[str, ...]:
    """`key` and, inside a model, the other name DeepSpeed accepts for the same field (alias or field name)."""
    model = _model_at(ds, path)
    field = versions._field(ds.raw_models.get(model, {}), key) if model else None
    if field is None:
        return (key,)
    names = [n for n, f in ds.raw_models[model]["fields"].items() if f is field]
    return tuple(dict.fromkeys([key, *names, *([field["alias"]] if field.get("alias") else [])]))


def _get(ds: schema.DeepSpeedSchema, node: Node, path: list[str], key: str) -> Entry | None:
    for name in _spellings(ds, path, key):
        entry = node.get(name)
        if entry is not None:
            return entry
    return None


def _block_on(ds: schema.DeepSpeedSchema, dotted: str, node: Node) -> bool:
    """False when the block is switched off (`enabled: false`, offload `device: none`), so its defaults are unused."""
    path = dotted.split(".")
    model = _model_at(ds, path)
    fields = ds.raw_models.get(model, {}).get("fields", {}) if model else {}
    for switch, off in (("enabled", False), ("device", "none")):
        entry = _get(ds, node, path, switch)
        if entry is not None:
            value = entry.node.value
        elif switch in fields:
            value = fields[switch].get("default")
        else:
            value = ds.plain_defaults.get(f"{dotted}.{switch}")
        if value == off:
            return False
    return True
