from __future__ import annotations

from collections.abc import Iterator

from cfgopt.loaders import edits
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.cross_file import lf_precision
from cfgopt.rules.support.deepspeed import hf_is_zero3
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind


class Zero3WithoutPrecisionBlock(Rule):
    code = "DS022"
    name = "zero3-without-precision-block"
    severity = Severity.WARNING
    kinds = frozenset({Kind.DEEPSPEED})
    # fires on a missing precision block, but only at ZeRO-3 (stage in zero_optimization)
    triggers = frozenset({"zero_optimization"})
    summary = "ZeRO-3 without a `bf16`/`fp16` block while the training config trains in bf16/fp16"
    why = (
        "Confidence: likely (code reading). Under ZeRO-3 transformers builds the model inside "
        "`deepspeed.zero.Init(config_dict_or_path=<this file>)` with no dtype, so DeepSpeed takes the dtype from "
        "the file's `bf16`/`fp16` blocks and, with neither, creates and partitions every weight in fp32. The HF "
        "Trainer fills `bf16.enabled` only in a block that exists; accelerate adds a bf16 block only when the "
        "Trainer builds its Accelerator, after LLaMA-Factory has loaded the model. The load then takes twice the "
        'weight memory of bf16. A `"bf16": {"enabled": "auto"}` block lets the training config decide.'
    )
    fails_when = "Silently at model load: fp32 partitions (2x the bf16 weight memory); OOM on tight budgets."
    evidence = (
        "transformers 5.6.0 modeling_utils.py:3660 (`deepspeed.zero.Init(config_dict_or_path=deepspeed_config())`)",
        "deepspeed 0.19.8 runtime/zero/partition_parameters.py:397-407 `_set_dtype` (no block -> torch.float), "
        ":637-650 (tensor creation in that dtype)",
        "transformers 5.6.0 integrations/deepspeed.py:180-188 (fills only existing blocks; dtype fp32 otherwise)",
    )
    example = 'ZeRO-3, LLaMA-Factory `bf16: true`, no "bf16" block   ->  add "bf16": {"enabled": "auto"}'
    fix_safety = 'Safe: "auto" takes the precision the training config already states.'

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        if not ctx.consumers or not hf_is_zero3(src) or not isinstance(src.data, dict):
            return
        if any(k in src.data for k in ("bf16", "bfloat16", "fp16")):
            return
        lf = ctx.settings.lf_schema
        for block in ("bf16", "fp16"):
            users = [c for c in ctx.consumers if lf_precision(c, block, lf)]
            if not users:
                continue
            zero = src.find(("zero_optimization",))
            yield self.at_entry(
                ctx,
                zero.node.get("stage") or zero,
                f"ZeRO-3 with no `{block}` block while {users[0].document.path.name} trains in {block}: "
                "`zero.Init` builds and partitions the weights in fp32 at model load (twice the memory)",
                fix=self.fix(
                    f'Add "{block}": {{"enabled": "auto"}}',
                    edits.insert_entry(src, None, block, {"enabled": "auto"}),
                    safe=True,
                ),
            )
            return
