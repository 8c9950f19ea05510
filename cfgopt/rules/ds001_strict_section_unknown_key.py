from __future__ import annotations

from collections.abc import Iterator

from cfgopt.knowledge import schema, versions
from cfgopt.loaders import edits
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.deepspeed import locate, section_errors
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind

# Keys that do nothing DeepSpeed could do differently: removing them keeps the run's meaning.
NO_OP_KEYS = {
    ("DeepSpeedZeroConfig", "stage3_parition_grads"): "ZeRO stages 2 and 3 always partition gradients; "
    "there is no such switch (nor a correctly spelled `stage3_partition_grads`)",
    ("DeepSpeedZeroConfig", "stage3_partition_grads"): "ZeRO stages 2 and 3 always partition gradients; "
    "there is no such switch",
}
# fp16 loss-scaling keys copied into a bf16 block: bf16 has no loss scaling, so they mean nothing there.
FP16_ONLY = {
    "loss_scale",
    "initial_scale_power",
    "loss_scale_window",
    "hysteresis",
    "consecutive_hysteresis",
    "min_loss_scale",
    "auto_cast",
    "fp16_master_weights_and_grads",
}


class StrictSectionUnknownKey(Rule):
    code = "DS001"
    name = "strict-section-unknown-key"
    severity = Severity.ERROR
    kinds = frozenset({Kind.DEEPSPEED})
    summary = "A key DeepSpeed's strict config model forbids (zero_optimization, fp16, bf16, compile, ...)"
    why = (
        'These sections are pydantic models with `extra="forbid"` in DeepSpeed: an unknown key is a '
        "ValidationError (`Extra inputs are not permitted`), not a warning. Under LLaMA-Factory it surfaces only "
        "at `deepspeed.initialize`, after the dataset was tokenised and the model loaded (ZeRO-3: at model "
        "construction inside `deepspeed.zero.Init`). Typical causes: blog typos (`stage3_parition_grads`), "
        "fp16 loss-scale keys copied into the bf16 block (strict since 0.17.1), documented-but-rejected keys."
    )
    fails_when = "At model construction or `deepspeed.initialize`: measured 15.8 s into a small run on an H200."
    evidence = (
        "deepspeed 0.19.8 runtime/config_utils.py `DeepSpeedConfigModel` (extra='forbid')",
        "measured: `stage3_parition_grads` fails 15.8 s after start inside deepspeed.zero.Init "
        "(bench/h200/measurements.md)",
        "https://github.com/hiyouga/LlamaFactory/issues/1949 (loss-scale keys in the bf16 block)",
    )
    example = '"stage3_parition_grads": true   ->  (removed: ZeRO-3 always partitions gradients)'
    fix_safety = (
        "Safe: removing keys that cannot mean anything (`stage3_parition_grads`, fp16 loss-scale keys in a bf16 "
        "block). Unsafe: renaming to the closest valid key."
    )

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        ds = ctx.settings.ds_schema
        for err in section_errors(ctx):
            if err.type != "extra_forbidden":
                continue
            entry = locate(err.section, err.loc)
            key = err.loc[-1] if err.loc else entry.key
            if entry.key != key:
                continue
            if err.model == "DeepSpeedZeroConfig" and key in ds.removed_zero:
                continue  # DS004 reports it with DeepSpeed's own removal message (checked first there too)
            where = ".".join(str(p) for p in entry.path[:-1])
            head = (
                f"`{key}` is not a key of `{where}`: DeepSpeed {ds.version} rejects it (Extra inputs are not permitted)"
            )
            history = versions.ds_key_history(entry.dotted, ds.version)
            if history:
                head = f"{head}; {history}"
            reason = NO_OP_KEYS.get((err.model, key))
            if reason:
                yield self.at_entry(
                    ctx,
                    entry,
                    f"{head}; {reason}",
                    fix=self.fix(f"Remove `{key}`", edits.delete_entry(src, entry), safe=True),
                )
                continue
            if err.model == "DeepSpeedBF16Config" and key in FP16_ONLY:
                yield self.at_entry(
                    ctx,
                    entry,
                    f"{head}; it is an fp16 loss-scaling key and bf16 has no loss scaling",
                    fix=self.fix(f"Remove `{key}`", edits.delete_entry(src, entry), safe=True),
                )
                continue
            model_name = err.model
            parent = entry.path[:-1]
            # the error's model is the section's; nested blocks (offload_param, ...) have their own fields
            node_model = _nested_model(ds, model_name, parent[1:] if len(parent) > 1 else ())
            names = ds.field_names(node_model) if node_model else set()
            siblings = {e.key for e in (src.find(parent).node.entries or [])} if src.find(parent) else set()
            from cfgopt.text.suggest import closest  # only for an unknown name (start-up)

            guess = closest(str(key), names)
            if guess and guess not in siblings and not (history and " valid in " in history):
                yield self.at_entry(
                    ctx,
                    entry,
                    f"{head}; did you mean `{guess}`?",
                    fix=self.fix(f"Rename to `{guess}`", edits.rename_key(src, entry, guess), safe=False),
                )
            else:
                yield self.at_entry(
                    ctx,
                    entry,
                    head,
                    fix=self.fix(f"Remove `{key}`", edits.delete_entry(src, entry), safe=False),
                )


def _nested_model(ds: schema.DeepSpeedSchema, model: str, path: tuple) -> str | None:
    for part in path:
        spec = ds.raw_models.get(model, {}).get("fields", {})
        field = spec.get(part) or next((f for f in spec.values() if f.get("alias") == part), None)
        if field is None or not field.get("model"):
            return None
        model = field["model"]
    return model
