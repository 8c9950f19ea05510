from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import (
    TRAIN_KINDS,
    deepspeed_zero3,
    distributed,
    is_train_group,
    on,
    report,
    value_of,
)
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind


class GaloreApolloBadamConflict(Rule):
    code = "LF012"
    name = "galore-apollo-badam-conflict"
    severity = Severity.ERROR
    kinds = TRAIN_KINDS | {Kind.LF_INFER}  # FinetuningArguments.__post_init__ runs for chat/export too
    triggers = frozenset({"use_galore", "use_apollo", "use_badam"})
    summary = "GaLore / APOLLO / BAdam combined with LoRA, each other, DeepSpeed or distributed training"
    why = (
        "Confidence: certain. FinetuningArguments refuses LoRA together with GaLore, APOLLO or BAdam, and more "
        "than one of the three. get_train_args refuses GaLore and APOLLO with any DeepSpeed config, and in "
        "distributed training the layer-wise GaLore/APOLLO, ratio-mode BAdam, and layer-wise BAdam without "
        "ZeRO-3. DeepSpeed and FSDP always launch distributed; a plain run is distributed when more than one GPU "
        "is visible (`--gpus`)."
    )
    fails_when = "At start-up (FinetuningArguments / get_train_args), before data or model load."
    evidence = (
        "llamafactory 0.9.5 hparams/finetuning_args.py L595-599",
        "llamafactory 0.9.5 hparams/parser.py L387-401",
        "docs/evidence/llamafactory.md §1.6 G22, G23",
    )
    example = "use_galore: true\ndeepspeed: ds_z2_config.json   ->  drop deepspeed (GaLore is single-process-friendly)"
    fix_safety = "No fix."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        galore, apollo, badam = on(ctx, "use_galore"), on(ctx, "use_apollo"), on(ctx, "use_badam")
        used = [k for k, v in (("use_galore", galore), ("use_apollo", apollo), ("use_badam", badam)) if v]
        if not used:
            return
        if value_of(ctx, "finetuning_type") == "lora":
            yield report(
                self,
                ctx,
                (*used, "finetuning_type"),
                f"`{used[0]}` with LoRA (the default `finetuning_type`): FinetuningArguments stops at start-up with "
                "`Cannot use LoRA with GaLore, APOLLO or BAdam together.`",
            )
        if len(used) > 1:
            yield report(
                self,
                ctx,
                tuple(used),
                "FinetuningArguments stops at start-up: `Cannot use GaLore, APOLLO or BAdam together.`",
            )
        if not is_train_group(ctx):
            return  # the checks above are FinetuningArguments.__post_init__ (chat/export too); the rest are training's
        if (galore or apollo) and on(ctx, "deepspeed"):
            yield report(
                self,
                ctx,
                ("deepspeed",),
                "GaLore/APOLLO with DeepSpeed: get_train_args stops at start-up with "
                "`GaLore and APOLLO are incompatible with DeepSpeed yet.`",
            )
        dist = distributed(ctx)
        if not dist:
            return
        if galore and on(ctx, "galore_layerwise"):
            yield report(self, ctx, ("galore_layerwise",), "`Distributed training does not support layer-wise GaLore.`")
        if apollo and on(ctx, "apollo_layerwise"):
            yield report(self, ctx, ("apollo_layerwise",), "`Distributed training does not support layer-wise APOLLO.`")
        if badam:
            if value_of(ctx, "badam_mode") == "ratio":
                yield report(
                    self,
                    ctx,
                    ("badam_mode", "use_badam"),
                    "ratio-mode BAdam in distributed training: get_train_args stops with `Radio-based BAdam does not "
                    "yet support distributed training, use layer-wise BAdam.`",
                )
            else:
                z3, certain = deepspeed_zero3(ctx)
                if not z3 and (certain or not on(ctx, "deepspeed")):
                    yield report(
                        self,
                        ctx,
                        ("use_badam", "deepspeed"),
                        "layer-wise BAdam in distributed training without ZeRO-3: get_train_args stops with "
                        "`Layer-wise BAdam only supports DeepSpeed ZeRO-3 training.`",
                    )
