from __future__ import annotations

import functools
import re
from collections.abc import Iterator

from cfgopt.knowledge.rocm_env import EVIDENCE, JUDGED, judge_variable
from cfgopt.loaders import shell
from cfgopt.rules.base import Context, Rule
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.patterns import lazy
from cfgopt.text.source import Kind, Node

_ASSIGNMENT = lazy(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.DOTALL)


def assignments(text: str) -> list[tuple[str, str | None, int, int]]:
    """(name, value or None when not literal, start, end) of every `VAR=value` the script sets: a command's
    prefixes, `export` / `declare -x` arguments and `env VAR=value` (control flow is not followed)."""
    out = []
    for command in shell.scan(text).commands:
        words = command.words
        i = 0
        while i < len(words) and _ASSIGNMENT.match(words[i].text):
            i += 1
        prefix = words[:i]
        rest = words[i:]
        if rest and rest[0].literal and rest[0].text in ("export", "declare", "typeset", "env", "local"):
            prefix = prefix + [w for w in rest[1:] if _ASSIGNMENT.match(w.text)]
        for word in prefix:
            match = _ASSIGNMENT.match(word.text)
            if match is not None:
                out.append((match.group(1), match.group(2) if word.literal else None, word.start, word.end))
    return out


@functools.lru_cache(maxsize=8)
def _names_one(text: str) -> bool:
    """Does the script name a judged variable? Once per script: each of its launch lines is a source of its own
    with the same text (a 600-line sweep would ask 600 times; bench/sweep/results.md)."""
    return any(name in text for name in JUDGED)


class SlowLauncherVariable(Rule):
    code = "ENV010"
    name = "slow-launcher-variable"
    severity = Severity.WARNING
    kinds = frozenset({Kind.LF_CLI})
    summary = (
        "A launch script sets a debugging, logging or tuning variable that slows training (rocBLAS forced or "
        "logged, caching off, launches serialized)"
    )
    why = (
        "Confidence: likely. Set in a script that launches LLaMA-Factory (`export`, `VAR=value cmd`, `env "
        "VAR=value`), these reach every rank: `TORCH_BLAS_PREFER_HIPBLASLT=0` makes PyTorch use rocBLAS where "
        "hipBLASLt is its default on MI200/MI300 (gfx90a/gfx942); `PYTORCH_NO_HIP_MEMORY_CACHING=1` / "
        "`PYTORCH_NO_CUDA_MEMORY_CACHING=1` and `HSA_DISABLE_FRAGMENT_ALLOCATOR=1` turn allocators off, which "
        "debugging needs and a performance run does not; `PYTORCH_TUNABLEOP_ENABLED=1` with tuning left on "
        "(the default) tunes every new GEMM shape during the run (info). The logging and debugging switches "
        "(a table in cfgopt/knowledge/rocm_env.py, each with its source and confidence): `ROCBLAS_LAYER` "
        "(a line per rocBLAS call), `AMD_LOG_LEVEL` >= 3, `HIP_LAUNCH_BLOCKING`, `AMD_SERIALIZE_KERNEL` / "
        "`AMD_SERIALIZE_COPY`, `CUDA_LAUNCH_BLOCKING`, `TORCH_NCCL_BLOCKING_WAIT` (and `NCCL_BLOCKING_WAIT`), "
        "`TORCH_DISTRIBUTED_DEBUG=DETAIL`; `NCCL_DEBUG=INFO`/`TRACE` is info (logs mostly at start-up). Not "
        "judged, as they cost nothing until something fails: `TORCH_SHOW_CPP_STACKTRACES`, "
        "`TORCH_NCCL_ASYNC_ERROR_HANDLING`, `NCCL_DEBUG=WARN`. The ROCm-only variables are judged on a ROCm "
        "target, or with no target (setting them says the job runs on ROCm); quiet on NVIDIA, and "
        "`CUDA_LAUNCH_BLOCKING` is quiet on ROCm. `cfgopt doctor` judges the same variables in the environment "
        "it runs in."
    )
    fails_when = (
        "Never fails: every step is slower (rocBLAS, uncached allocations, logging, serialized launches) or the "
        "first ones are (tuning)."
    )
    evidence = EVIDENCE
    example = "export TORCH_BLAS_PREFER_HIPBLASLT=0   # --target mi300x  ->  (removed)"
    fix_safety = "No fix: a variable may be there on purpose while debugging."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        text = ctx.source.document.text
        if not _names_one(text):
            return
        target = ctx.settings.target if ctx.settings.target.stated else None
        found = assignments(text)
        tuning = next((v for n, v, _, _ in found if n == "PYTORCH_TUNABLEOP_TUNING"), None)
        for name, value, start, end in found:
            if name not in JUDGED:
                continue
            judged = judge_variable(name, value, target, tuning)
            if judged is not None:
                severity, why = judged
                node = Node(value, start, end)
                yield self.at_node(ctx, node, f"`{name}={value}`: {why}", key=name, severity=severity)
