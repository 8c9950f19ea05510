from __future__ import annotations

from collections.abc import Iterator

from cfgopt.loaders import edits
from cfgopt.plan import space
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import TRAIN_KINDS, entry_of, on, report, training, value_of
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.user_text import is_number

# Below this learning rate most AdamW steps are smaller than half a bf16 ulp of a typical weight (|w| ~ 0.02:
# a step of about lr against 2^-9 x 0.02 = 4e-5), so they round away.
LARGEST_ROUNDED_LR = 1e-4
# Optimizers that scale or hold their updates their own way (GaLore's and APOLLO's scale factors, BAdam's active
# block): not what was measured, so left alone.
OWN_UPDATE_RULES = ("use_badam", "use_galore", "use_apollo")


class PureBf16SmallUpdates(Rule):
    code = "PF015"
    name = "pure-bf16-small-updates"
    severity = Severity.WARNING
    kinds = TRAIN_KINDS
    triggers = frozenset({"pure_bf16"})  # reports only where `pure_bf16` is on
    summary = "`pure_bf16` on a full or freeze fine-tune at a fine-tuning learning rate: most weight updates round away"
    why = (
        "Confidence: likely (measured, and arithmetic). `pure_bf16` keeps the trained weights themselves in bf16, "
        "8 significant bits, with no fp32 master copy (LLaMA-Factory skips the fp32 upcast, model/adapter.py). An "
        "AdamW step moves a weight by about the learning rate; below half a bf16 ulp of the weight (2^-9 of it) "
        "the sum rounds back to the old value, so at lr 1e-5 a weight of 0.02 never moves. On one H200 a Qwen3-4B "
        "full SFT at lr 1e-5, same seed and samples, reached loss 7.70 after 20 steps in pure bf16 against 5.31 "
        "with `bf16: true`; `cfgopt verify` fails such a plan, and the speed planner does not propose it. The "
        "usual remedy is `bf16: true` (fp32 master weights: 2 more bytes per trained parameter, plus the optimizer "
        "states in fp32), or 8-bit AdamW to get the memory back. GaLore, APOLLO and BAdam scale or hold their updates "
        "their own way and are left alone."
    )
    fails_when = "Never fails: the run trains, but most weights stop learning (the loss falls far more slowly)."
    evidence = (
        "bench/verify/results.md 'Numerics of the plan's knobs' (Qwen3-4B full SFT on an H200: pure bf16 +48% loss "
        "at step 19 of 20; `bash bench/verify/noise.sh` with PLAN=1)",
        "llamafactory 0.9.5 model/adapter.py (trainable parameters upcast to fp32 unless pure_bf16)",
    )
    example = "finetuning_type: full\nlearning_rate: 1.0e-5\npure_bf16: true   ->  bf16: true"
    fix_safety = (
        "Unsafe: replaces `pure_bf16: true` by `bf16: true`, which changes the precision and needs more memory; "
        "written only where the memory estimate with fp32 master weights still fits the target (or no target is "
        "stated), else the message names 8-bit AdamW."
    )

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        if not training(ctx) or not on(ctx, "pure_bf16") or any(on(ctx, k) for k in OWN_UPDATE_RULES):
            return
        if value_of(ctx, "finetuning_type") not in ("full", "freeze"):
            return
        if space.optim_of(ctx.job.values()) == space.SR_OPTIM:
            return  # stochastic rounding keeps the small updates (on average): what this rule warns of is answered
        lr = value_of(ctx, "learning_rate")
        if not is_number(lr) or not 0 < lr < LARGEST_ROUNDED_LR:
            return
        # here, not at import: only full or freeze training in pure bf16 asks the memory model (start-up)
        from cfgopt.rules.support.memory_advice import GPUS_IF_UNSTATED_SPEND, estimate_ctx, gpus

        n = gpus(ctx, GPUS_IF_UNSTATED_SPEND)
        after = estimate_ctx(ctx, n, pure_bf16=False, bf16=True)
        fits = after is None or after.verdict == "fits"
        cost = f" (~{after.required_gib:.0f} GiB per GPU by the estimate)" if after is not None else ""
        if fits:
            remedy = f"use `bf16: true`{cost}"
        else:
            room = "would be tight" if after.verdict == "tight" else "would not fit"
            target = ctx.settings.target
            remedy = (
                f"`bf16: true` {room} (~{after.required_gib:.0f} GiB per GPU of the {target.name}'s "
                f"{target.memory_gib:.0f}): keep the memory with `optim: adamw_bnb_8bit` and `bf16: true`"
            )
        yield report(
            self,
            ctx,
            ("pure_bf16", "learning_rate"),
            f"`pure_bf16: true` at learning_rate {lr:g}: the weights themselves are bf16, so AdamW steps below 1/512 "
            f"of a weight round away and most of the model stops learning (a Qwen3-4B full SFT at lr 1e-5 reached "
            f"loss 7.70 vs 5.31 in 20 steps); {remedy}",
            fix=self._fix(ctx) if fits else None,
        )

    def _fix(self, ctx: Context):
        src, pure, bf16 = ctx.source, entry_of(ctx, "pure_bf16"), entry_of(ctx, "bf16")
        if pure is None:
            return None
        if bf16 is None:
            changes = edits.rename_key(src, pure, "bf16")
        else:
            set_bf16, drop_pure = edits.replace_value(src, bf16, True), edits.delete_entry(src, pure)
            if set_bf16 is None or drop_pure is None:
                return None
            changes = set_bf16 + drop_pure
        return self.fix("Replace `pure_bf16: true` by `bf16: true`", changes, safe=False)
