from __future__ import annotations

from collections.abc import Iterator

from cfgopt.loaders import edits
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import TRAIN_KINDS, deepspeed_zero3, entry_of, is_train_group
from cfgopt.text.diagnostics import Diagnostic, Severity


class LigerKernelConflict(Rule):
    code = "LF027"
    name = "liger-kernel-conflict"
    severity = Severity.WARNING
    kinds = TRAIN_KINDS
    triggers = frozenset({"use_liger_kernel", "enable_liger_kernel"})
    summary = "HF `use_liger_kernel` next to LLaMA-Factory's `enable_liger_kernel`, or Liger under ZeRO-3"
    why = (
        "Confidence: likely. `enable_liger_kernel` is LLaMA-Factory's switch: it patches the model class at "
        "load (and disables fused cross-entropy for stages other than pt/sft). HF's `use_liger_kernel` makes the "
        "Trainer patch again; with both, the model is patched twice (Liger #409: no speed-up). Liger under "
        "DeepSpeed ZeRO-3 has a known backward shape error with partitioned parameters (Liger #1048: "
        "`size of tensor a (0) must match`), fixed there by ZeRO-2 or `stage3_param_persistence_threshold: 1e10`."
    )
    fails_when = "Double patch: never fails, no benefit. ZeRO-3: at the first backward pass, for some models."
    evidence = (
        "llamafactory 0.9.5 model/model_utils/liger_kernel.py L30-90 (enable_liger_kernel)",
        "transformers 5.6.0 trainer.py L1369 (`if self.args.use_liger_kernel:`)",
        "https://github.com/linkedin/Liger-Kernel/issues/409, https://github.com/linkedin/Liger-Kernel/issues/1048",
    )
    example = "use_liger_kernel: true\nenable_liger_kernel: true   ->  remove use_liger_kernel"
    fix_safety = "Safe: removes HF's `use_liger_kernel` when `enable_liger_kernel` is on (one patch remains)."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        if not is_train_group(ctx):
            return
        hf, lf = entry_of(ctx, "use_liger_kernel"), entry_of(ctx, "enable_liger_kernel")
        hf_on, lf_on = hf is not None and bool(hf.node.value), lf is not None and bool(lf.node.value)
        if hf_on and lf_on:
            yield self.at_entry(
                ctx,
                hf,
                "`use_liger_kernel` (HF Trainer) and `enable_liger_kernel` (LLaMA-Factory) both patch the model; "
                "keep `enable_liger_kernel` only",
                fix=self.fix("Remove `use_liger_kernel`", edits.delete_entry(ctx.source, hf), safe=True),
            )
        if hf_on or lf_on:
            z3, certain = deepspeed_zero3(ctx)
            if z3 and certain:
                yield self.at_entry(
                    ctx,
                    lf if lf_on else hf,
                    "Liger kernels under DeepSpeed ZeRO-3: a known backward failure with partitioned parameters "
                    "(Liger #1048); ZeRO-2, or `stage3_param_persistence_threshold: 1e10`, avoids it",
                )
