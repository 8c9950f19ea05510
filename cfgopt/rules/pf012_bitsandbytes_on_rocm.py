from __future__ import annotations

from collections.abc import Iterator

from cfgopt.diagnostics import Diagnostic, Severity
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import entry_of, value_of
from cfgopt.source import Kind


def _bnb_optim(value) -> bool:
    return isinstance(value, str) and ("8bit" in value or value.startswith("paged_") or "bnb" in value)


class BitsandbytesOnRocm(Rule):
    code = "PF012"
    name = "bitsandbytes-on-rocm"
    severity = Severity.INFO
    default_on = False
    opt_in_because = "contested: ROCm support depends on the bitsandbytes release installed where the job runs"
    kinds = frozenset({Kind.LF_TRAIN, Kind.LF_INFER, Kind.LF_CLI})
    summary = "bitsandbytes quantization or 8-bit/paged optimizers on a ROCm target: needs a ROCm bitsandbytes build"
    why = (
        "Confidence: contested. `quantization_bit` with the bnb method and the `*_8bit`/`paged_*`/`*_bnb*` "
        "optimizers need bitsandbytes' GPU library. Recent releases list AMD GPUs as supported; older wheels lack "
        "`libbitsandbytes_rocm*.so` (LLaMA-Factory #8793) and source builds need the right `BNB_ROCM_ARCH` "
        "(gfx942 for MI300X). A one-step run in the job image settles it."
    )
    fails_when = "At model load (quantization) or optimizer creation, when the installed bitsandbytes lacks ROCm."
    evidence = (
        "llamafactory 0.9.5 model/model_utils/quantization.py L167-181 (bnb path)",
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
        if optim is not None and _bnb_optim(optim.node.value):
            yield self.at_entry(
                ctx,
                optim,
                f"`optim: {optim.node.value}` uses bitsandbytes: on {target.name} it needs a ROCm build",
                on="value",
            )
