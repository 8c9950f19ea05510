from __future__ import annotations

import json
from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.text.diagnostics import Diagnostic, Edit, Severity
from cfgopt.text.source import Kind

# The sections both readers take as objects: the HF Trainer walks the dotted paths of its "auto" keys with `.get`
# (optimizer.params.*, scheduler.params.*, fp16.enabled, bf16.enabled, zero_optimization.stage), DeepSpeed calls
# `.keys()` on optimizer / scheduler and `**` on fp16 / bf16 / bfloat16 / zero_optimization and scheduler.params.
# A boolean `zero_optimization` is DS013's (DeepSpeed's deprecated stage form); JSON null is "absent" to both.
SECTIONS = (
    ("optimizer",),
    ("optimizer", "params"),
    ("scheduler",),
    ("scheduler", "params"),
    ("fp16",),
    ("bf16",),
    ("bfloat16",),
    ("zero_optimization",),
)
PRECISION = {"fp16", "bf16", "bfloat16"}
_PY_TYPE = {bool: "bool", int: "int", float: "float", str: "str", list: "list"}


class SectionNotAnObject(Rule):
    code = "DS027"
    name = "section-not-an-object"
    severity = Severity.ERROR
    kinds = frozenset({Kind.DEEPSPEED})
    triggers = frozenset(path[0] for path in SECTIONS)
    summary = 'A DeepSpeed section that must be an object is a boolean, number, string or list (`"bf16": true`)'
    why = (
        'Confidence: certain (both readers run on each value). `"bf16": true` reads like a switch, but both readers '
        "of the file take `bf16`, `fp16`, `optimizer`, `scheduler` (and their `params`) and `zero_optimization` as "
        'objects: the HF Trainer (LLaMA-Factory\'s path) fills its "auto" keys by walking dotted paths with '
        "`.get` and DeepSpeed builds its config models from them with `**`. Write the switch inside: "
        '`"bf16": {"enabled": true}`. A boolean `zero_optimization` is DS013 (DeepSpeed reads it as a stage).'
    )
    fails_when = (
        "Under LLaMA-Factory / the HF Trainer: at TrainingArguments creation (seconds), "
        "`AttributeError: 'bool' object has no attribute 'get'` (the value's type named). Under the bare DeepSpeed "
        "launcher: at DeepSpeedConfig construction, `TypeError: DeepSpeedBF16Config() argument after ** must be a "
        "mapping, not bool` (fp16 / bf16 / bfloat16 / zero_optimization) or `AttributeError: 'bool' object has no "
        "attribute 'keys'` (optimizer / scheduler); `scheduler.params` at `deepspeed.initialize` (`**` again)."
    )
    evidence = (
        "transformers 5.6.0 integrations/deepspeed.py `HfTrainerDeepSpeedConfig.fill_match` -> accelerate 1.11.0 "
        "utils/deepspeed.py `find_config_node` (config.get on each node), reproduced for every section here with "
        "`HfTrainerDeepSpeedConfig(cfg).trainer_config_process(TrainingArguments(...))`",
        "deepspeed 0.19.8 runtime/config.py `get_bfloat16_config` / `get_fp16_config` (`**`), `get_optimizer_name` and "
        "`get_scheduler_name` (`.keys()`), reproduced with `DeepSpeedConfig({... 'bf16': True})`",
        "deepspeed 0.14.5-0.16.4 runtime/config.py `get_fp16_enabled` / `get_bfloat16_enabled` -> `get_scalar_param` "
        "(`.get` on the value)",
    )
    example = '"bf16": true   ->  "bf16": {"enabled": true}'
    fix_safety = (
        'Safe for `fp16` / `bf16` / `bfloat16` given a boolean or "auto": it becomes `{"enabled": VALUE}`, the one '
        "meaning the switch can have (the file cannot run as written). No fix otherwise (what the section should "
        "hold is the user's to say)."
    )

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        for path in SECTIONS:
            found = src.find(path)
            if found is None:
                continue
            value = found.node.value
            if value is None or found.node.is_mapping or (path == ("zero_optimization",) and isinstance(value, bool)):
                continue
            kind = _PY_TYPE.get(type(value), type(value).__name__)
            dotted = ".".join(path)
            fix = None
            if path[0] in PRECISION and (isinstance(value, bool) or value == "auto"):
                text = f'{{"enabled": {json.dumps(value)}}}'
                fix = self.fix(f"Write {text}", [Edit(found.node.start, found.node.end, text)], safe=True)
            yield self.at_entry(
                ctx,
                found,
                f"`{dotted}` is {json.dumps(value)[:40]}, not an object: the HF Trainer (LLaMA-Factory's path) stops "
                f"at start-up with `AttributeError: '{kind}' object has no attribute 'get'`, and {ctx.ds_label} "
                "rejects it too" + ('; the switch goes inside: `{"enabled": ...}`' if path[0] in PRECISION else ""),
                on="value",
                fix=fix,
            )
