from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import entry_of, is_train_group, on, report, value_of
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Entry, Kind

PPO_REFUSED = "`PPO only accepts wandb, tensorboard, or trackio logger.`"  # hparams/parser.py L344-347


class PpoMisconfigured(Rule):
    code = "LF017"
    name = "ppo-misconfigured"
    severity = Severity.ERROR
    kinds = frozenset({Kind.LF_TRAIN, Kind.LF_INFER, Kind.LF_CLI})
    triggers = frozenset({"stage=ppo"})  # `stage: ppo` must be written (the default is sft)
    summary = "`stage: ppo` without a reward model, without `do_train`, with S^2-Attn, or with an unsupported logger"
    why = (
        "Confidence: certain. FinetuningArguments needs `reward_model` for PPO and refuses a LoRA/OFT reward "
        "model for full/freeze tuning. get_train_args refuses PPO without `do_train`, with `shift_attn`, with a "
        "LoRA reward model under Unsloth or KTransformers, and with a `report_to` logger other than wandb, "
        "tensorboard or trackio, judged on the list TrainingArguments makes of the value (`none` alone is no "
        "logger; `null`, `false` or a comma-separated string is one item, refused; `all` is every integration "
        "installed where the job runs: a warning). That check runs at start-up, before the Trainer would refuse an "
        "unknown name (LF003, which leaves such a value to this rule); the fix LF003 would offer comes along where "
        "the value it writes passes PPO."
    )
    fails_when = "At start-up (FinetuningArguments / get_train_args)."
    evidence = (
        "llamafactory 0.9.5 hparams/finetuning_args.py L580-587",
        "llamafactory 0.9.5 hparams/parser.py L332-348",
        "transformers 5.6.0 training_args.py L1560-1567 (`report_to` made a list: `all` / `none` alone first)",
    )
    example = "stage: ppo   (no reward_model)  ->  reward_model: saves/llama3-8b/lora/reward"
    fix_safety = (
        "No fix, except LF003's for `report_to` where its value passes PPO: `none` for a value meaning no "
        "reporting or a name in another case (safe), the closest logger for a typo (unsafe)."
    )

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        if value_of(ctx, "stage") != "ppo":
            return
        ftype, rtype = value_of(ctx, "finetuning_type"), value_of(ctx, "reward_model_type")
        if value_of(ctx, "reward_model") is None:
            yield report(
                self,
                ctx,
                ("stage",),
                "`stage: ppo` without `reward_model`: LLaMA-Factory stops at start-up with `reward_model is "
                "necessary for PPO training.`",
            )
        if rtype in ("lora", "oft") and ftype != rtype:
            yield report(
                self,
                ctx,
                ("reward_model_type", "finetuning_type"),
                f"`reward_model_type: {rtype}` with `finetuning_type: {ftype}`: LLaMA-Factory stops at start-up with "
                f"`reward_model_type cannot be {rtype} for Freeze/Full PPO training.`",
            )
        if not is_train_group(ctx):
            return
        if not on(ctx, "do_train"):
            yield report(
                self,
                ctx,
                ("do_train", "stage"),
                "PPO without `do_train`: LLaMA-Factory stops at start-up with `PPO training does not support "
                "evaluation, use the SFT stage to evaluate models.`",
            )
        if on(ctx, "shift_attn"):
            yield report(
                self,
                ctx,
                ("shift_attn",),
                "`shift_attn` with PPO: LLaMA-Factory stops at start-up with `PPO training is incompatible "
                "with S^2-Attn.`",
            )
        if rtype == "lora":
            for key, name in (("use_unsloth", "Unsloth"), ("use_kt", "KTransformers")):
                if on(ctx, key):
                    yield report(
                        self,
                        ctx,
                        (key,),
                        f"`{key}` with a LoRA reward model: LLaMA-Factory stops at start-up with `{name} does "
                        "not support lora reward model.`",
                    )
        entry = entry_of(ctx, "report_to")
        if entry is not None:  # unset: `none`, which PPO takes
            yield from self._report_to(ctx, entry)

    def _report_to(self, ctx: Context, entry: Entry) -> Iterator[Diagnostic]:
        """`report_to` that LLaMA-Factory's PPO check refuses, on the list TrainingArguments makes of it
        (`ppo_refuses`); LF003 leaves these to this rule (the run stops here first), so its fix comes along where
        the value it writes passes PPO too."""
        # here, not at import: the rule runs on every `stage`, `report_to` is in few configs (lint start-up)
        from cfgopt.rules.support.report_to import ppo_refuses, refused, replacement_fix, written_value

        value = written_value(ctx, entry)
        stops = ppo_refuses(value)
        if stops is False:
            return
        shown = ctx.source.document.text[entry.node.start : entry.node.end] or repr(value)
        if stops is None:
            yield self.at_entry(
                ctx,
                entry,
                f"`report_to: {shown}` with PPO: TrainingArguments turns it into every integration installed where "
                f"the job runs, and LLaMA-Factory stops at start-up with {PPO_REFUSED} if one is not wandb, "
                "tensorboard or trackio",
                on="value",
                severity=Severity.WARNING,
            )
            return
        allowed = ctx.settings.lf_schema.report_to
        why = refused(value, allowed) if allowed is not None else None
        read = " (read as `[None]`, not as no reporting)" if value is None else ""
        yield self.at_entry(
            ctx,
            entry,
            f"`report_to: {shown}`{read} with PPO: LLaMA-Factory stops at start-up with {PPO_REFUSED}",
            on="value",
            fix=replacement_fix(self, ctx, entry, why, ppo=True) if why is not None else None,
        )
