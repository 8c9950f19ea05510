from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import TRAIN_KINDS, deepspeed_zero3, entry_of, is_train_group, on
from cfgopt.text.diagnostics import Diagnostic, Severity


class UnslothUnsupportedSetup(Rule):
    code = "LF024"
    name = "unsloth-unsupported-setup"
    severity = Severity.WARNING
    kinds = TRAIN_KINDS
    triggers = frozenset({"use_unsloth"})
    summary = "`use_unsloth` in a multi-GPU run (DeepSpeed, FSDP or `--gpus` > 1), or on ROCm"
    why = (
        "Confidence: likely (multi-GPU), contested (ROCm). Unsloth's free version trains on one GPU; under "
        "torchrun it stops with `Unsloth currently does not support multi GPU setups` and LLaMA-Factory does not "
        "check this itself (only ZeRO-3 is refused at parse time, see LF009). The maintainer's advice for "
        "multi-GPU is `enable_liger_kernel` instead (#6940, #5635; 2024-2025, LLaMA-Factory 0.8-0.9.1). Unsloth's "
        "guard counts GPUs from `nvidia-smi` output: on a ROCm node, which has no `nvidia-smi`, it sees none and "
        "does not stop (unsloth PR #4450, 2026, describes the bypass on 8x MI355X), so there a multi-GPU run goes "
        "on unsupported rather than failing. On ROCm, Unsloth needs its AMD install (a ROCm torch and a "
        "bitsandbytes release with ROCm, see PF012); whether a given image has it is not visible from the config "
        "(info). Recent Unsloth releases have been extending multi-GPU support: a run with the installed version "
        "settles it."
    )
    fails_when = "At model load (Unsloth's own check), after tokenisation; or at import on an image without it."
    evidence = (
        "LLaMA-Factory issues #6940, #5635, #4667 (maintainer: use enable_liger_kernel)",
        "llamafactory 0.9.5 hparams/parser.py L409-410 (only ZeRO-3 is refused)",
        "docs/evidence/rocm_perf.md §2.3 and R27 (Unsloth AMD install page, read in 2025; contested)",
        "https://github.com/unslothai/unsloth/pull/4450 (the nvidia-smi guard on ROCm, March 2026), "
        "https://github.com/unslothai/unsloth/issues/975 (the guard spawns nvidia-smi, 2024)",
    )
    example = "use_unsloth: true\ndeepspeed: ds_z2_config.json   ->  enable_liger_kernel: true"
    fix_safety = "No fix: replacing Unsloth with Liger changes the kernels and memory use."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        if not is_train_group(ctx):
            return
        entry = entry_of(ctx, "use_unsloth")
        if entry is None or not entry.node.value:
            return
        z3, certain = deepspeed_zero3(ctx)
        if z3 and certain:
            return  # LF009: refused at start-up
        gpus = ctx.settings.gpus
        why = (
            "DeepSpeed"
            if on(ctx, "deepspeed")
            else "FSDP"
            if on(ctx, "fsdp")
            else f"--gpus {gpus}"
            if gpus is not None and gpus > 1
            else ""
        )
        if why and ctx.settings.target.is_rocm:
            yield self.at_entry(
                ctx,
                entry,
                f"`use_unsloth` in a multi-GPU run ({why}) on {ctx.settings.target.name}: Unsloth supports one GPU, "
                "and its guard reads nvidia-smi, absent on ROCm, so the run goes on unsupported instead of stopping; "
                "use `enable_liger_kernel: true` for multi-GPU speed-ups",
            )
        elif why:
            yield self.at_entry(
                ctx,
                entry,
                f"`use_unsloth` in a multi-GPU run ({why}): Unsloth's free version stops with `Unsloth currently does "
                "not support multi GPU setups`; use `enable_liger_kernel: true` for multi-GPU speed-ups",
            )
        elif ctx.settings.target.is_rocm:
            yield self.at_entry(
                ctx,
                entry,
                f"`use_unsloth` on {ctx.settings.target.name}: Unsloth needs its AMD/ROCm install; check the image "
                "has it (a ROCm torch and a bitsandbytes release with ROCm support)",
                severity=Severity.INFO,
            )
