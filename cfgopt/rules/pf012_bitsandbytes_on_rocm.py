from __future__ import annotations

from collections.abc import Iterator

from cfgopt.knowledge.bitsandbytes import ROCM_EVIDENCE, is_bnb_optimizer
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import entry_of, value_of
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind


class BitsandbytesOnRocm(Rule):
    code = "PF012"
    name = "bitsandbytes-on-rocm"
    severity = Severity.INFO
    default_on = False
    opt_in_because = "contested: ROCm support depends on the bitsandbytes release installed where the job runs"
    kinds = frozenset({Kind.LF_TRAIN, Kind.LF_INFER, Kind.LF_CLI})
    summary = "bitsandbytes quantization or optimizers on a ROCm target: needs a bitsandbytes release with ROCm"
    why = (
        "Confidence: contested. `quantization_bit` with the bnb method and the optimizers transformers hands to "
        "bitsandbytes (`adamw_bnb_8bit`, `adamw_8bit`, `paged_*`, `ademamix*`, `lion_*`, `rmsprop_bnb*`, and "
        "GaLore's 8-bit AdamW; not torchao's `adamw_torch_8bit` / `adamw_torch_4bit`) need bitsandbytes' GPU "
        "library. Whether it runs on ROCm is a release question: the PyPI package has no ROCm library before 0.47 "
        "(the ROCm backend was merged in mid-2025 and first released in 0.47.0); 0.47-0.49 ship it as "
        "experimental; from 0.50 the installation guide lists AMD GPUs as officially supported. Older wheels lack "
        "`libbitsandbytes_rocm*.so` (LLaMA-Factory #8793) and source builds need the right `BNB_ROCM_ARCH` "
        "(gfx942 for MI300X, gfx90a for MI250X/MI210). A bitsandbytes pin in the job's requirement files is "
        "judged by the requirement rules; `cfgopt doctor` reads the installed one. A one-step run in the job "
        "image settles it."
    )
    fails_when = "At model load (quantization) or optimizer creation, when the installed bitsandbytes lacks ROCm."
    evidence = (
        "llamafactory 0.9.5 model/model_utils/quantization.py L167-181 (bnb path)",
        "transformers 5.6.0 trainer_optimizer.py:560-576 (`_BITSANDBYTES_OPTIMIZERS`), training_args.py:116-157",
        ROCM_EVIDENCE,
        "docs/evidence/rocm_perf.md §2.3; docs/evidence/llamafactory.md §2 (bnb on ROCm), LLaMA-Factory #8793",
    )
    example = "quantization_bit: 4   # --target mi300x: check `python -m bitsandbytes` in the image"
    fix_safety = "No fix."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        target = ctx.settings.target
        if not target.is_rocm:
            return
        bit = entry_of(ctx, "quantization_bit")
        if bit is not None and bit.node.value is not None and value_of(ctx, "quantization_method") == "bnb":
            yield self.at_entry(
                ctx,
                bit,
                f"bitsandbytes quantization on {target.name}: needs a bitsandbytes build with ROCm support in the "
                "job image",
            )
        optim = entry_of(ctx, "optim")
        if optim is not None and is_bnb_optimizer(optim.node.value):
            yield self.at_entry(
                ctx,
                optim,
                f"`optim: {optim.node.value}` uses bitsandbytes: on {target.name} it needs a ROCm build",
                on="value",
            )
