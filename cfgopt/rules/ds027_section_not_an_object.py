from __future__ import annotations

import json
from collections.abc import Iterator

from cfgopt.knowledge.schema import ds_section_values
from cfgopt.rules.base import Context, Rule
from cfgopt.text.diagnostics import Diagnostic, Edit, Severity
from cfgopt.text.source import Entry, Kind

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# The HF Trainer (every LLaMA-Factory run) fills its "auto" keys by walking these dotted paths with `.get`
# (optimizer.params.*, scheduler.params.*, fp16.enabled, bf16.enabled, zero_optimization.stage): any value there
# that is neither an object nor null stops it, whatever the DeepSpeed release. `zero_optimization` is DS005's
# (a value that is not a block) and DS013's (a boolean: DeepSpeed's deprecated stage form).
HF_WALKED = (("optimizer",), ("optimizer", "params"), ("scheduler",), ("scheduler", "params"), ("fp16",), ("bf16",))
PRECISION = {"fp16", "bf16", "bfloat16"}
OTHER_RULES = frozenset({"zero_optimization"})


def kind_of(value: Any) -> str:
    """A value's kind as the probe table keys it: null / true / false, else its Python type's name."""
    return json.dumps(value) if value is None or isinstance(value, bool) else type(value).__name__


# Every top-level block the probe table (schemas/ds-section-values.json) names in any release: a key outside it is
# never a suspect, so a lint of a JSON of scalars and objects does not read the table (start-up). Checked against
# the table by tests/knowledge/test_ds_section_values.py.
PROBED_BLOCKS = frozenset(
    {
        "activation_checkpointing",
        "aio",
        "autotuning",
        "bf16",
        "bfloat16",
        "checkpoint",
        "comet",
        "comms_logger",
        "compile",
        "compression_training",
        "csv_monitor",
        "data_efficiency",
        "data_types",
        "expert_parallel",
        "flops_profiler",
        "fp16",
        "hybrid_engine",
        "nebula",
        "optimizer",
        "pipeline",
        "scheduler",
        "sparse_attention",
        "tensor_parallel",
        "tensorboard",
        "timers",
        "torch_autocast",
        "wandb",
        "weight_quantization",
        "zero_optimization",
    }
)


class SectionNotAnObject(Rule):
    code = "DS027"
    name = "section-not-an-object"
    severity = Severity.ERROR
    kinds = frozenset({Kind.DEEPSPEED})
    summary = "A DeepSpeed block that must be an object is null, a boolean, a number, a string or a list"
    why = (
        'Confidence: certain (the real readers ran on each value). `"bf16": true` reads like a switch and '
        '`"tensorboard": null` like "off", but the readers of the file take these blocks as objects: the HF Trainer '
        '(LLaMA-Factory\'s path) fills its "auto" keys by walking `optimizer.params`, `scheduler.params`, '
        "`fp16`, `bf16` with `.get`, and DeepSpeed's config reader builds each block with `**`, `.get`, `.keys()` "
        "or a pydantic model. Which values each release rejects is not read by hand: scripts/probe_ds_sections.py "
        "runs DeepSpeedConfig on every value kind of every block (cfgopt/knowledge/schemas/ds-section-values.json). "
        'Write the switch inside (`"bf16": {"enabled": true}`), or remove the block. Judged: every top-level '
        "block the probe found the release rejects a value of that kind for (`pipeline` included, read with "
        "`.items()` and no model) and the HF Trainer's paths; a release not probed is judged on the HF Trainer's "
        "paths only."
    )
    fails_when = (
        "The HF Trainer's paths: at TrainingArguments creation (seconds), `AttributeError: 'bool' object has no "
        "attribute 'get'` (the value's type named). Any other block: at `deepspeed.initialize`, after the model is "
        "loaded and the data tokenised, with the error the probe recorded (`TypeError: ... argument after ** must "
        "be a mapping`, `AttributeError: 'NoneType' object has no attribute 'get'`, a pydantic ValidationError)."
    )
    evidence = (
        "transformers 5.6.0 integrations/deepspeed.py `HfTrainerDeepSpeedConfig.fill_match` -> accelerate 1.11.0 "
        "utils/deepspeed.py `find_config_node` (config.get on each node), reproduced for every path with "
        "`HfTrainerDeepSpeedConfig(cfg).trainer_config_process(TrainingArguments(...))`",
        "deepspeed 0.19.8 runtime/config.py `DeepSpeedConfig._initialize_params` and the `get_*_config` readers: "
        "run on each block and value kind by scripts/probe_ds_sections.py",
        "deepspeed 0.14.5-0.16.4 runtime/config.py `get_fp16_enabled` / `get_bfloat16_enabled` -> `get_scalar_param` "
        "(`.get` on the value)",
    )
    example = '"bf16": true   ->  "bf16": {"enabled": true}'
    fix_safety = (
        'Safe for `fp16` / `bf16` / `bfloat16` given a boolean or "auto": it becomes `{"enabled": VALUE}`, the one '
        "meaning the switch can have (the file cannot run as written). No fix otherwise (what the block should "
        "hold, or whether it should go, is the user's to say)."
    )

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        ds = ctx.settings.ds_schema
        # every key of the release may be a block its reader takes as an object, read or not by a pydantic model
        # (`"pipeline": false`: `param_dict.get("pipeline", {}).items()`): the probe table says which
        blocks = (ds.top_level_keys & PROBED_BLOCKS) | {path[0] for path in HF_WALKED}
        top = src.root.entries or () if src.root is not None and src.root.is_mapping else ()
        suspects = [e for e in top if e.key in blocks and e.key not in OTHER_RULES and not e.node.is_mapping]
        probed = ds_section_values(ds.version) if suspects else {}  # the table is read only for a suspect block
        for entry in suspects:
            yield from self._judge(ctx, entry, (entry.key,), probed.get(entry.key, {}))
        for path in HF_WALKED:
            if len(path) > 1 and (found := src.find(path)) is not None:
                yield from self._judge(ctx, found, path, {})

    def _judge(self, ctx: Context, entry: Entry, path: tuple[str, ...], probed: dict[str, str]) -> Iterator[Diagnostic]:
        node = entry.node
        if node.is_mapping:
            return
        value, kind, dotted = node.value, kind_of(node.value), ".".join(path)
        if dotted in OTHER_RULES:
            return
        walked = path in HF_WALKED and value is not None
        if not walked and kind not in probed:
            return
        shown = json.dumps(value)[:40]  # a JSON file's value
        if walked:
            said = (
                "the HF Trainer (LLaMA-Factory's path) stops at start-up with "
                f"`AttributeError: '{type(value).__name__}' object has no attribute 'get'`"
                + (f", and {ctx.ds_label} rejects it too" if kind in probed else "")
            )
        else:
            when = "at `deepspeed.initialize` (after model load and tokenisation)"
            said = f"{ctx.ds_label} stops {when} with `{probed[kind]}`"
        fix = None
        if path[0] in PRECISION and len(path) == 1 and (isinstance(value, bool) or value == "auto"):
            text = f'{{"enabled": {json.dumps(value)}}}'
            fix = self.fix(f"Write {text}", [Edit(node.start, node.end, text)], safe=True)
        yield self.at_entry(
            ctx,
            entry,
            f"`{dotted}` is {shown}, not an object: {said}"
            + (
                '; the switch goes inside: `{"enabled": ...}`'
                if path[0] in PRECISION
                else "; give an object or remove it"
            ),
            on="value",
            fix=fix,
        )
