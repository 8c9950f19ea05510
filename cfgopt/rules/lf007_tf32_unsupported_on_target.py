from __future__ import annotations

from collections.abc import Iterator

from cfgopt import edits
from cfgopt.diagnostics import Diagnostic, Severity
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import TRAIN_KINDS, entry_of, is_train_group


class Tf32UnsupportedOnTarget(Rule):
    code = "LF007"
    name = "tf32-unsupported-on-target"
    severity = Severity.ERROR
    kinds = TRAIN_KINDS
    triggers = frozenset({"tf32"})
    summary = "`tf32: true` on a ROCm, CPU or pre-Ampere (V100, T4) target: TrainingArguments refuses it"
    why = (
        "Confidence: certain. HF `TrainingArguments.__post_init__` raises when `tf32` is true and "
        "`is_torch_tf32_available()` is false, and that function returns false whenever `torch.version.cuda` is "
        "None: on every ROCm build (MI200/MI300/MI355X, even CDNA3/4, which have TF32 hardware), without a CUDA GPU, "
        "and on an NVIDIA GPU below compute capability 8.0 (V100, T4). TF32 is an NVIDIA Ampere+ format; on "
        "Hopper it is a no-op for bf16 work. Judged for the target (quiet when there is none)."
    )
    fails_when = "At start-up: `ValueError: --tf32 requires Ampere or a newer GPU arch, cuda>=11 and torch>=1.7`."
    evidence = (
        "transformers 5.6.0 training_args.py L1641-1646 (`raise ValueError('--tf32 requires Ampere ...')`)",
        "transformers 5.6.0 utils/import_utils.py L583-599 (`is_torch_tf32_available`: False when "
        "`torch.version.cuda is None` or the device's major capability is below 8)",
        "docs/evidence/rocm_perf.md §2.2 and R01 (certain); LLaMA-Factory issue #3718",
    )
    example = "tf32: true   ->  (removed)   # --target mi300x"
    fix_safety = (
        "Unsafe: removes the key. It is what the target needs, but it depends on `--target` being the hardware "
        "the job really runs on (with no target stated the rule is quiet)."
    )

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        target = ctx.settings.target
        if (target.is_cuda and target.tf32) or not target.stated or not is_train_group(ctx):
            return
        entry = entry_of(ctx, "tf32")
        if entry is None or not entry.node.value:
            return
        if target.is_cuda:
            where = f"{target.device}: no TF32, compute capability below 8.0"
        else:
            where = "ROCm (torch.version.cuda is None)" if target.is_rocm else "a host without a CUDA GPU"
        yield self.at_entry(
            ctx,
            entry,
            f"`tf32: true` on {target.name} ({where}): TrainingArguments stops at start-up with "
            "`--tf32 requires Ampere or a newer GPU arch`",
            fix=self.fix("Remove `tf32`", edits.delete_entry(ctx.source, entry), safe=False),
        )
