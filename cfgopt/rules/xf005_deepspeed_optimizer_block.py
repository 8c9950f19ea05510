from __future__ import annotations

from collections.abc import Iterator

from cfgopt import edits
from cfgopt.diagnostics import Diagnostic, Severity
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.cross_file import lf_value
from cfgopt.source import Kind


class DeepspeedOptimizerBlock(Rule):
    code = "XF005"
    name = "deepspeed-optimizer-block"
    severity = Severity.WARNING
    kinds = frozenset({Kind.DEEPSPEED})
    triggers = frozenset({"optimizer", "scheduler"})
    summary = "An `optimizer` / `scheduler` block overrides the optimizer / LR schedule LLaMA-Factory configures"
    why = (
        "Confidence: certain. When the DeepSpeed JSON has an `optimizer` block the HF Trainer hands DeepSpeed a "
        "placeholder (DummyOptim) and DeepSpeed builds the optimizer from the block: LLaMA-Factory's `optim` and its "
        "own optimizers (LoRA+, GaLore, BAdam, ...) are not used, and on ROCm DeepSpeed's FusedAdam must be "
        "JIT-built with hipcc. A `scheduler` block likewise replaces `lr_scheduler_type` / warmup. The values the "
        'Trainer can fill must then be "auto" (XF002), and with ZeRO-3 and a frozen reference model (DPO/KTO/PPO) '
        "the blocks have crashed optimizer init (LLaMA-Factory #2546). LLaMA-Factory's own DeepSpeed configs have "
        "neither block."
    )
    fails_when = "Silently: the run uses DeepSpeed's optimizer/schedule instead of the training config's."
    evidence = (
        "transformers 5.6.0 integrations/deepspeed.py:542-559 `deepspeed_optim_sched` (DummyOptim / DummyScheduler)",
        "https://github.com/hiyouga/LlamaFactory/issues/2546, https://github.com/hiyouga/LlamaFactory/issues/1485",
        "https://github.com/deepspeedai/DeepSpeed/issues/6600 (FusedAdam build failure on ROCm, October 2024, a "
        "regression of that month fixed by PR #6587: the JIT build with hipcc is what remains)",
    )
    example = '"scheduler": {"type": "WarmupLR", ...}   ->  remove; lr_scheduler_type in the YAML applies'
    fix_safety = "Unsafe: removing the block changes the optimizer or schedule that runs."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        if not ctx.consumers or src.root is None:
            return
        lf = ctx.settings.lf_schema
        consumer = ctx.consumers[0]
        name = consumer.document.path.name
        rocm = ctx.settings.target.is_rocm
        for block, lf_key in (("optimizer", "optim"), ("scheduler", "lr_scheduler_type")):
            entry = src.root.get(block)
            if entry is None:
                continue
            extra = ""
            if block == "optimizer" and rocm:
                extra = f"; on {ctx.settings.target.device} DeepSpeed's FusedAdam is JIT-built with hipcc"
            yield self.at_entry(
                ctx,
                entry,
                f"The `{block}` block replaces the {block} the HF Trainer would build: `{lf_key}` "
                f"({lf_value(consumer, lf_key, lf)!r} in {name}) is silently not used{extra}",
                fix=self.fix(f"Remove the `{block}` block", edits.delete_entry(src, entry), safe=False),
            )
