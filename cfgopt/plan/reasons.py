"""Why a candidate is not planned or not run, in the words the speed planner's notes and tune's rows share.

A rejection has a kind (tune's status for a memory-pruned row is `pruned: memory`, in the same word), the knob
whose value it concerns (None: the candidate as a whole, as for memory) and the reason in words. On the lint
path (the planner): a record (`Record`), no dataclass.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from cfgopt.plan.space import KNOB_NAMES, NUMERICS, REFUSED, Knobs
from cfgopt.text.record import Record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MEMORY = "memory"  # estimated not to fit, or no estimate to say it fits
PACKAGE = "package"  # needs a package not known to be installed where the run happens
__all__ = ["MEMORY", "NUMERICS", "PACKAGE", "REFUSED", "Rejection"]


class Rejection(Record):
    kind: str  # MEMORY, PACKAGE, REFUSED or NUMERICS
    knob: str | None  # the knob (cfgopt.plan.space.KNOB_NAMES) whose value is refused; None: the whole candidate
    why: str


def does_not_fit(peak_gib: float | None) -> str:
    """A memory rejection in words: tune's `pruned: memory` rows and the planner's notes say the same."""
    return f"estimated peak {peak_gib:.1f} GiB does not fit" if peak_gib is not None else "estimated not to fit"


_PRECISION = {"bf16": "bf16 mixed precision", "fp16": "fp16 mixed precision", "pure_bf16": "pure bf16", "fp32": "fp32"}
_OPTIM = {"adamw_bnb_8bit": "8-bit AdamW", "adafactor": "Adafactor", "adamw_torch_fused": "fused AdamW"}


def value_words(name: str, k: Knobs) -> str:
    """One knob's value of a candidate, in short words ("pure bf16", "gradient checkpointing off", "2 x 1")."""
    value = getattr(k, name)
    if name in ("micro", "ga"):
        return f"{k.micro} x {k.ga}"
    if name == "zero":
        return "no DeepSpeed" if value == "none" else f"ZeRO-{value[1:2]}" + (" with offload" * ("offload" in value))
    words = {
        "gc": f"gradient checkpointing {'on' if value else 'off'}",
        "attn": "eager attention (`flash_attn: disabled`)" if value == "disabled" else f"attention {value}",
        "packing": "packing" if value else "no packing",
        "liger": "Liger kernels" if value else "no Liger kernels",
        "precision": _PRECISION.get(value, str(value)),
        "optim": _OPTIM.get(value, f"optimizer {value}"),
    }
    return words[name]


def rejection_words(name: str, k: Knobs, rejection: Rejection, best: Knobs) -> str:
    """Why knob `name`'s value in candidate `k` is not planned: "pure bf16 not planned: refused with ZeRO-3
    (LLaMA-Factory)"; for a candidate rejected as a whole (memory), with what else it changes from `best`."""
    others = [value_words(n, k) for n in k.changes(best) if n != name and rejection.knob is None]
    also = f" (with {', '.join(others)})" if others else ""
    words = value_words(name, k)
    return f"{_AS_A_CHANGE.get(words, words)} not planned: {rejection.why}{also}"


# A value that is an absence reads as the change it makes ("no DeepSpeed not planned" said the opposite)
_AS_A_CHANGE = {
    "no DeepSpeed": "dropping DeepSpeed",
    "no packing": "packing off",
    "no Liger kernels": "Liger kernels off",
}


def why_not(
    best: Knobs, kept: Iterable[Knobs], rejected: dict[Knobs, Rejection], speed: Callable[[Knobs], float]
) -> list[tuple[Knobs, str]]:
    """For each knob value (the batch shape aside) that rejected candidates have and no kept one has, the
    rejection of the candidate with it closest to `best` (then the fastest by `speed`), in words: why the plan
    does not take that value. In the order of the knobs."""
    names = [n for n in KNOB_NAMES if n != "micro"]
    taken = {n: {getattr(k, n) for k in kept} for n in names}
    closest: dict[tuple[str, Any], tuple[tuple[int, float], Knobs]] = {}
    for k, rejection in rejected.items():
        order = (len(k.changes(best)), -speed(k))
        for n in names:
            value = getattr(k, n)
            if value in taken[n] or (rejection.knob is not None and rejection.knob != n):
                continue
            if (n, value) not in closest or order < closest[(n, value)][0]:
                closest[(n, value)] = (order, k)
    found = sorted(closest.items(), key=lambda item: names.index(item[0][0]))
    return [(k, rejection_words(n, k, rejected[k], best)) for (n, _), (_, k) in found]
