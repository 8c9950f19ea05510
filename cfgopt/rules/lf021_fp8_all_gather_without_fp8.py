from __future__ import annotations

from collections.abc import Iterator

from cfgopt.loaders import edits
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import TRAIN_KINDS, entry_of, is_train_group, on
from cfgopt.text.diagnostics import Diagnostic, Severity


class Fp8AllGatherWithoutFp8(Rule):
    code = "LF021"
    name = "fp8-all-gather-without-fp8"
    severity = Severity.WARNING
    kinds = TRAIN_KINDS
    triggers = frozenset({"fp8_enable_fsdp_float8_all_gather"})
    summary = "`fp8_enable_fsdp_float8_all_gather` without `fp8: true`: FP8 stays off although the log says it is on"
    why = (
        "Confidence: certain. get_train_args logs `fp8_enable_fsdp_float8_all_gather requires fp8=True. Setting "
        "fp8=True.` but then sets `model_args.fp8`, an attribute nothing reads; `training_args.fp8`, which the "
        "FP8 set-up checks, stays false. The run trains in bf16/fp16 while its log claims FP8 (same at HEAD)."
    )
    fails_when = "Never fails: the run silently trains without FP8."
    evidence = (
        "llamafactory 0.9.5 hparams/parser.py L420-422 (`model_args.fp8 = True`)",
        "llamafactory 0.9.5 train/fp8_utils.py L38, L130, L162 (read `training_args.fp8`)",
    )
    example = "fp8_enable_fsdp_float8_all_gather: true   ->  add fp8: true"
    fix_safety = "Unsafe: adds `fp8: true`, what the log promises; FP8 changes numerics and needs Hopper-class GPUs."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        if not is_train_group(ctx):
            return
        entry = entry_of(ctx, "fp8_enable_fsdp_float8_all_gather")
        if entry is None or not entry.node.value or on(ctx, "fp8"):
            return
        fp8 = entry_of(ctx, "fp8")
        if fp8 is not None:
            fix_edits = edits.replace_value(ctx.source, fp8, True)
        else:
            fix_edits = edits.insert_top(ctx.source, "fp8", True)
        yield self.at_entry(
            ctx,
            entry,
            "`fp8_enable_fsdp_float8_all_gather` without `fp8: true`: LLaMA-Factory logs 'Setting fp8=True' but sets "
            "the wrong object, so FP8 training stays off",
            fix=self.fix("Set `fp8: true`", fix_edits, safe=False),
        )
