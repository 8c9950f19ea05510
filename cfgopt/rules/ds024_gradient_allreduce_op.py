from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.deepspeed import lax_true, zero_stage
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind

SUPPORTED = ("mean", "sum")


class GradientAllreduceOp(Rule):
    code = "DS024"
    name = "gradient-allreduce-op"
    severity = Severity.ERROR
    kinds = frozenset({Kind.DEEPSPEED})
    triggers = frozenset({"gradient_allreduce_op"})
    summary = "`gradient_allreduce_op` not `mean`/`sum`, or `sum` with ZeRO-3, ZenFlow or DeepCompile"
    why = (
        "Confidence: certain. DeepSpeed 0.19 added `gradient_allreduce_op` (how data-parallel gradients are "
        "combined). `get_gradient_allreduce_op` refuses any value but `mean` and `sum` (case-insensitive), and "
        "`DeepSpeedConfig._do_error_check` refuses `sum` with ZeRO stage 3, with a ZenFlow block and with "
        "DeepCompile. Releases before 0.19 do not read the key at all (DS002 says so)."
    )
    fails_when = "When DeepSpeed builds its config (`deepspeed.initialize`, after the model is loaded)."
    evidence = (
        "deepspeed 0.19.8 runtime/config.py `get_gradient_allreduce_op`, `DeepSpeedConfig._do_error_check` "
        "(the audit table, tests/data/startup-audit.json)",
    )
    example = '"gradient_allreduce_op": "sum" with "zero_optimization": {"stage": 3}   ->  drop it (mean)'
    fix_safety = "No fix: `sum` changes the gradient scale, which the learning rate may have been tuned for."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        if "gradient_allreduce_op" not in ctx.settings.ds_schema.top_level_keys:
            return
        entry = ctx.source.find(("gradient_allreduce_op",))
        if entry is None:
            return
        value = entry.node.value
        op = value.lower() if isinstance(value, str) else value
        if op not in SUPPORTED:
            yield self.at_entry(
                ctx,
                entry,
                f'`gradient_allreduce_op: {value!r}`: {ctx.ds_label} accepts only "mean" or "sum" and '
                "stops when it builds its config",
                on="value",
            )
            return
        if op != "sum":
            return
        data = ctx.source.data if isinstance(ctx.source.data, dict) else {}
        zero = data.get("zero_optimization")
        compile_block = data.get("compile")
        conflicts = []
        if zero_stage(ctx.source) == 3:
            conflicts.append("ZeRO stage 3")
        if isinstance(zero, dict) and zero.get("zenflow") is not None:
            conflicts.append("ZenFlow")
        if isinstance(compile_block, dict) and lax_true(compile_block.get("deepcompile")):
            conflicts.append("DeepCompile")
        for conflict in conflicts:
            yield self.at_entry(
                ctx,
                entry,
                f'`gradient_allreduce_op: "sum"` is not supported with {conflict}: {ctx.ds_label} stops '
                'when it builds its config; leave the default ("mean")',
                on="value",
            )
