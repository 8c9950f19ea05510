from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import TRAIN_KINDS, deepspeed_zero3, entry_of, is_train_group, on, report
from cfgopt.text.diagnostics import Diagnostic, Severity


class DeepspeedWithFsdp(Rule):
    code = "LF030"
    name = "deepspeed-with-fsdp"
    severity = Severity.ERROR
    kinds = TRAIN_KINDS
    triggers = frozenset({"fsdp", "auto_find_batch_size"})  # each finding needs one of them beside `deepspeed`
    summary = "`fsdp` and `deepspeed` both set, or `auto_find_batch_size` under ZeRO-3: the Trainer refuses them"
    why = (
        "Confidence: certain. The parsers accept both `fsdp` and `deepspeed` (verified), but the HF Trainer "
        "refuses the pair when it is built; it also refuses `auto_find_batch_size` with DeepSpeed ZeRO-3. Both "
        "checks run after the dataset was tokenised and the model loaded."
    )
    fails_when = (
        "When the Trainer is built (after tokenisation and model load): `Using --fsdp xxx together with "
        "--deepspeed is not possible`, or `auto_find_batch_size isn't supported yet with DeepSpeed Zero-3`."
    )
    evidence = (
        "transformers 5.6.0 trainer.py L451-455 (fsdp with deepspeed), L849-855 (auto_find_batch_size, ZeRO-3)",
        "docs/evidence/llamafactory.md §2 (`fsdp` + `deepspeed` not rejected at parse, verified)",
    )
    example = "fsdp: full_shard auto_wrap\ndeepspeed: ds_z3_config.json   ->  keep one of them"
    fix_safety = "No fix: choose one sharding backend."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        if not is_train_group(ctx) or not on(ctx, "deepspeed"):
            return
        fsdp = entry_of(ctx, "fsdp")
        if fsdp is not None and fsdp.node.value:
            yield self.at_entry(
                ctx,
                fsdp,
                "`fsdp` and `deepspeed` together: the Trainer stops after model load with `Using --fsdp xxx together "
                "with --deepspeed is not possible, deactivate one of those flags.`",
            )
        if on(ctx, "auto_find_batch_size"):
            z3, certain = deepspeed_zero3(ctx)
            if z3:
                yield report(
                    self,
                    ctx,
                    ("auto_find_batch_size",),
                    "`auto_find_batch_size` with DeepSpeed ZeRO-3: the Trainer stops after model load with "
                    "`auto_find_batch_size isn't supported yet with DeepSpeed Zero-3`",
                    severity=None if certain else Severity.WARNING,
                )
