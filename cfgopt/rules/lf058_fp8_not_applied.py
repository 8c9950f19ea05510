from __future__ import annotations

from collections.abc import Iterator

from cfgopt.environment.stated import transformers_at_least
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import TRAIN_KINDS, entry_of, is_train_group, on
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.requirements.versions import exact_version


class Fp8NotApplied(Rule):
    code = "LF058"
    name = "fp8-not-applied"
    severity = Severity.WARNING
    kinds = TRAIN_KINDS
    triggers = frozenset({"fp8"})
    summary = "`fp8: true` under transformers 5: the run trains in the `bf16`/`fp16` mixed precision, not FP8"
    why = (
        "Confidence: certain for the code (LLaMA-Factory 0.9.5, transformers 5.6.0, accelerate 1.11.0). "
        "LLaMA-Factory turns FP8 on by setting `ACCELERATE_MIXED_PRECISION=fp8` in the SFT and pre-training "
        "trainers' `__init__`, once the arguments are parsed. transformers 5 reads that variable earlier, while "
        "parsing `TrainingArguments` (`bf16`/`fp16` override it), and builds the Accelerator with that "
        "`mixed_precision`, so the Accelerator gets `bf16` (or `fp16`) and its `fp8_enabled` stays false. "
        "`fp8_backend: te` changes nothing: its patch forces FP8 only when the Trainer passes no "
        "`kwargs_handlers`, and it always passes one. Under DeepSpeed the precision is the DeepSpeed config's, "
        "which `bf16`/`fp16` fill. Judged where the job's transformers is 5 or newer (an exact pin, a lower "
        "bound, or a probed node) and `bf16` or `fp16` is on; silent without them (an `ACCELERATE_MIXED_PRECISION"
        "=fp8` in the launch environment would then reach the Accelerator) and with `use_mca` (Megatron's own "
        "FP8 path). LLaMA-Factory logs `FP8 was requested but Accelerate shows fp8_enabled=False` at info level."
    )
    fails_when = "Never: the run trains in bf16 (or fp16) mixed precision, at bf16's speed, with no error."
    evidence = (
        "llamafactory 0.9.5 train/fp8_utils.py L130-135 (`configure_fp8_environment` sets the variable), "
        "train/sft/trainer.py L62-65 and train/pt/trainer.py L46-49 (called in the trainer's `__init__`), "
        "fp8_utils.py L214-227 (`patch_accelerator_for_fp8` injects only without `kwargs_handlers`)",
        "transformers 5.6.0 training_args.py L1580-1584 (`mixed_precision` read when the arguments are parsed), "
        "trainer.py L696 and L718 (the Accelerator gets `args.mixed_precision` and a `DistributedDataParallelKwargs`)",
        "accelerate 1.11.0 state.py L954-957 and accelerator.py L477 (`fp8_enabled` only for `mixed_precision='fp8'`)",
        "tests/oracle/test_oracle_fp8_not_applied.py: the Trainer LLaMA-Factory builds, on CPU, gets `bf16`",
    )
    example = "fp8: true\nbf16: true   # transformers==5.6.0  ->  trains in bf16, not FP8"
    fix_safety = (
        "No fix: removing `fp8` changes nothing that runs, and whether to get FP8 (another transformers or "
        "LLaMA-Factory release) or accept bf16 is the user's choice."
    )

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        entry = entry_of(ctx, "fp8")
        if entry is None or not on(ctx, "fp8") or not is_train_group(ctx) or on(ctx, "use_mca"):
            return
        precision = "fp16" if on(ctx, "fp16") else "bf16" if on(ctx, "bf16") else None
        env = ctx.job.environment
        if precision is None or not transformers_at_least(env, (5,)):
            return  # without bf16/fp16 a launch-time ACCELERATE_MIXED_PRECISION=fp8 would still reach it
        spec = env.packages.get("transformers", "")
        version = exact_version(spec)
        stated = f"transformers {version}" if version else f"transformers{spec}" if spec else "transformers 5"
        ds = " (under DeepSpeed, as its config's `bf16`/`fp16` say)" if on(ctx, "deepspeed") else ""
        yield self.at_entry(
            ctx,
            entry,
            f"`fp8: true` with {stated} ({env.where}): FP8 is not applied, the run trains in {precision} mixed "
            f"precision{ds}; LLaMA-Factory sets `ACCELERATE_MIXED_PRECISION=fp8` only when the trainer is built, "
            f"after transformers 5 read it with the arguments (`{precision}: true` wins there) and handed "
            f"`mixed_precision='{precision}'` to the Accelerator",
        )
