from __future__ import annotations

from collections.abc import Iterator

from cfgopt.knowledge.bitsandbytes import ROCM_EVIDENCE, ROCM_FIRST, uses_bitsandbytes
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.requirements import exact_version, pins_of
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.requirements.versions import parse_spec
from cfgopt.text.source import Kind
from cfgopt.text.user_text import integer


def _below_rocm(spec: str) -> str:
    """The version (or bound) that keeps bitsandbytes below its first ROCm release, "" if none does."""
    first = ".".join(map(str, ROCM_FIRST))
    exact = exact_version(spec)
    if exact is not None:
        return exact if tuple(integer(p) or 0 for p in exact.split(".")[:2]) < ROCM_FIRST else ""
    try:
        clauses = parse_spec(spec)
    except ValueError:
        return ""
    for op, bound in clauses:
        parts = tuple(n for p in bound.split(".")[:2] if (n := integer(p)) is not None)
        if (op == "<" and parts <= ROCM_FIRST) or (op == "<=" and parts < ROCM_FIRST):
            return f"{op}{bound} (ROCm support starts at {first})"
    return ""


class BitsandbytesWithoutRocm(Rule):
    code = "ENV003"
    name = "bitsandbytes-without-rocm"
    severity = Severity.WARNING
    kinds = frozenset({Kind.REQUIREMENTS})
    triggers = frozenset({"bitsandbytes"})
    summary = "A bitsandbytes release without ROCm support pinned for a ROCm job that quantizes or uses its optimizers"
    why = (
        "Confidence: likely. bitsandbytes' PyPI package carries a ROCm library from 0.47.0 on (the ROCm backend "
        "was merged in mid-2025; 0.47-0.49 call it experimental, 0.50 lists AMD GPUs as supported). An older pin "
        "installs a package whose GPU library is CUDA-only, so on a ROCm node 4/8-bit loading and the bitsandbytes "
        "optimizers fail. Reported only when a LLaMA-Factory config of the same run, at or below the requirement "
        "file's folder, uses bitsandbytes (`quantization_bit` with the bnb method, or one of the optimizers "
        "transformers hands to it; PF012 lists them) and the target is ROCm."
    )
    fails_when = "At model load (quantization) or optimizer creation."
    evidence = (ROCM_EVIDENCE, "LLaMA-Factory issue #8793 (no `libbitsandbytes_rocm*.so` in an older wheel)")
    example = "bitsandbytes==0.43.3   # --target mi300x, quantization_bit: 4  ->  bitsandbytes>=0.47"
    fix_safety = "No fix: a newer bitsandbytes may need a newer torch."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        target = ctx.settings.target
        if not target.is_rocm:
            return
        users = [(c, uses_bitsandbytes(_values(ctx, c))) for c in ctx.consumers]
        users = [(c, why) for c, why in users if why]
        if not users:
            return
        config, why = users[0]
        for entry in pins_of(ctx, ("bitsandbytes",)):
            below = _below_rocm(str(entry.node.value))
            if below:
                yield self.at_entry(
                    ctx,
                    entry,
                    f"bitsandbytes {below} has no ROCm library, and {config.document.path.name} uses it (`{why}`) on "
                    f"{target.name}: pin bitsandbytes>=0.47 (0.50+ for official AMD support)",
                    on="value",
                )


def _values(ctx: Context, config) -> dict:
    job = ctx.job_of(config)
    return {key: job.value(key) for key in ("quantization_bit", "quantization_method", "optim")}
