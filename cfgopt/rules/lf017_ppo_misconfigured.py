from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import as_list, is_train_group, on, report, value_of
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind

PPO_LOGGERS = ("wandb", "tensorboard", "trackio", "none")


class PpoMisconfigured(Rule):
    code = "LF017"
    name = "ppo-misconfigured"
    severity = Severity.ERROR
    kinds = frozenset({Kind.LF_TRAIN, Kind.LF_INFER, Kind.LF_CLI})
    triggers = frozenset({"stage"})  # `stage: ppo` must be written (the default is sft)
    summary = "`stage: ppo` without a reward model, without `do_train`, with S^2-Attn, or with an unsupported logger"
    why = (
        "Confidence: certain. FinetuningArguments needs `reward_model` for PPO and refuses a LoRA/OFT reward "
        "model for full/freeze tuning. get_train_args refuses PPO without `do_train`, with `shift_attn`, with a "
        "LoRA reward model under Unsloth or KTransformers, and with a `report_to` logger other than wandb, "
        "tensorboard or trackio."
    )
    fails_when = "At start-up (FinetuningArguments / get_train_args)."
    evidence = (
        "llamafactory 0.9.5 hparams/finetuning_args.py L580-587",
        "llamafactory 0.9.5 hparams/parser.py L332-348",
    )
    example = "stage: ppo   (no reward_model)  ->  reward_model: saves/llama3-8b/lora/reward"
    fix_safety = "No fix."

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
        loggers = as_list(value_of(ctx, "report_to"))
        bad = [x for x in loggers if x not in PPO_LOGGERS and x != "all"]
        if bad or "all" in loggers:
            yield report(
                self,
                ctx,
                ("report_to",),
                f"`report_to: {', '.join(map(str, loggers))}` with PPO: LLaMA-Factory stops at start-up with "
                "`PPO only accepts "
                "wandb, tensorboard, or trackio logger.`",
                severity=Severity.ERROR if bad else Severity.WARNING,
            )
