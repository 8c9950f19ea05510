"""Summaries of verification runs, the before/after comparison, and its renderings (table, JSON, PNG).

FLOP convention (stated in every report): model FLOPs per real token = 2N (forward) + 2N (activation
gradients) + 2·N_trainable (weight gradients), N = the parameters a token passes through: all of a dense model's,
a mixture of experts' top-k routed experts and the rest (`flops.token_parameters`; its layout unknown, no MFU);
attention score FLOPs and the recomputation of gradient checkpointing are not counted. So a full fine-tune
counts 6N and LoRA about 4N (as bench/h200/measurements.md). MFU = that x real tokens/s / the device's dense
bf16 peak.

Preference stages: a pairwise sample is two real sequences (chosen and rejected, both trained on), so both
count as real tokens; where a reference model's forward runs over them too (DPO but orpo / simpo, KTO:
`synthetic_meta.reference_forward`) each real token counts 2N more. KTO's KL sequences, run forward without a
gradient by the policy and the reference, are not counted.
"""

from __future__ import annotations

import io
import json
import statistics
from pathlib import Path

from cfgopt.text.writer import write_new

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

FLOP_CONVENTION = (
    "MFU counts 2N forward + 2N activation-gradient + 2N_trainable weight-gradient FLOPs per "
    "real (non-padding) token (+2N for a reference model's forward in DPO / KTO), N the parameters a token passes "
    "through (a mixture of experts: its top-k routed experts, not all); attention scores and checkpoint "
    "recomputation not counted"
)
NOISE = 0.05  # step-time differences below 5% are treated as noise
WARMUP_FACTOR = 1.25  # a leading step slower than this x the steady median is warm-up (compilation, allocator)
MIN_STEADY_STEPS = 4  # fewer steady steps than this and two runs of one config may differ by more than 5%


def warmup_steps(seconds: list[float]) -> int:
    """How many leading steps are warm-up: those slower than WARMUP_FACTOR x the median of the later half, at
    least 1 and at most half of the steps. On the H200 two runs of one DPO shape took 6.6 s / 4.5 s vs
    2.9 s / 2.5 s for steps 1-2 and agreed within 4% from step 3; dropping a fixed first quarter of a short run
    kept the slow step 2 in one of them, and they reported 2,236 vs 2,686 tokens/s (docs/verify.md)."""
    count = len(seconds)
    if count < 2:
        return 0
    steady = statistics.median(seconds[count // 2 :])
    leading = 0
    while leading < count and seconds[leading] > WARMUP_FACTOR * steady:
        leading += 1
    return min(max(leading, 1), count // 2)


def impossible(steps: list[dict[str, Any]], capacity: int | None) -> str | None:
    """Why the steps' counts cannot be true (a counting bug to refuse, never a figure to print), None if they
    can: a step of no time, or more real tokens than the step ran (its input_ids) or could hold."""
    for s in steps:
        where = f"step {s.get('step', '?')}"
        if s["seconds"] <= 0:
            return f"{where} took {s['seconds']:.3g} s (the clock went wrong)"
        ran = s.get("padded_tokens")  # absent from runs recorded before the worker counted it
        if ran is not None and s["real_tokens"] > ran:
            return f"{where} counted {s['real_tokens']:,} real tokens, more than the {ran:,} it ran"
        if capacity and s["real_tokens"] > capacity:
            return (
                f"{where} counted {s['real_tokens']:,} real tokens, more than micro-batch x accumulation x rows x "
                f"cutoff = {capacity:,}"
            )
    return None


def _speed(out: dict[str, Any], metrics: dict[str, Any], warm: list[dict[str, Any]]) -> None:
    """tokens/s and MFU of the steady steps into `out`, or `cannot_measure` with why."""
    if all(s["seconds"] > 0 for s in metrics["steps"]):  # the time is measured even where a count is refused
        out["median_step_s"] = statistics.median(s["seconds"] for s in warm)
    why = impossible(metrics["steps"], metrics.get("capacity_tokens_per_step"))  # warm-up's counts too
    if why is not None:
        out["cannot_measure"] = why
        return
    # tokens per step over the median step: a step slowed by something else on the machine (another process,
    # a stall of the data loader) moves the median less than the mean, so two runs of one config agree
    seconds = len(warm) * out["median_step_s"]
    out["real_tokens_per_s"] = sum(s["real_tokens"] for s in warm) / seconds
    out["padded_tokens_per_s"] = sum(s.get("padded_tokens", s["real_tokens"]) for s in warm) / seconds
    out["supervised_tokens_per_s"] = sum(s.get("supervised_tokens", 0) for s in warm) / seconds
    if metrics.get("mfu_unknown"):  # a mixture of experts of a layout not counted: no MFU rather than a wrong one
        out["mfu_unknown"] = metrics["mfu_unknown"]
        return
    n = metrics.get("active_parameters", metrics.get("parameters"))
    trainable = metrics.get("trainable_active_parameters", metrics.get("trainable_parameters"))
    peak = metrics.get("peak_tflops")
    if n and out["real_tokens_per_s"] and peak:
        per_token = 4 * n + 2 * (trainable or 0) + (2 * n if metrics.get("reference_forward") else 0)
        mfu = per_token * out["real_tokens_per_s"] / (peak * 1e12)
        if mfu > 1:
            out["cannot_measure"] = f"MFU {mfu:.0%} is over 100% (the token or parameter count is wrong)"
            for key in ("real_tokens_per_s", "padded_tokens_per_s", "supervised_tokens_per_s"):
                out[key] = None
            return
        out["mfu"] = mfu


def summarize(metrics: dict[str, Any], min_warmup: int = 0) -> dict[str, Any]:
    """A run's figures: its steady steps' speed (warm-up detected, at least `min_warmup` steps left out while one
    step stays) or why it cannot be measured, its memory and loss. verify and tune both read runs through it."""
    steps = metrics.get("steps") or []
    skipped = max(warmup_steps([s["seconds"] for s in steps]), min(min_warmup, max(0, len(steps) - 1)))
    warm = steps[skipped:]
    out: dict[str, Any] = {
        "steps_measured": len(warm),
        "warmup_steps_excluded": skipped,
        "device": metrics.get("device"),
        "platform": metrics.get("platform"),
        "attn_implementation": metrics.get("attn_implementation"),
        "peak_allocated_gib": metrics.get("peak_allocated_gib"),
        "peak_reserved_gib": metrics.get("peak_reserved_gib"),
        "train_begin_s": metrics.get("train_begin_s"),
        "error": metrics.get("error"),
    }
    for key in ("stage", "notes"):  # the worker's: the stage run, and what it changed (rm: value head dropout)
        if metrics.get(key):
            out[key] = list(metrics[key]) if key == "notes" else metrics[key]
    if warm:
        _speed(out, metrics, warm)
        if len(warm) < MIN_STEADY_STEPS and not out.get("cannot_measure"):
            out.setdefault("notes", []).append(
                f"only {len(warm)} steady steps (after {skipped} of warm-up): the speed may be off by more than 5%"
                " (--steps)"
            )
    losses = metrics.get("losses") or []
    if losses:
        out["loss_first"], out["loss_last"] = losses[0]["loss"], losses[-1]["loss"]
        out["loss_finite"] = all(x["loss"] == x["loss"] and abs(x["loss"]) != float("inf") for x in losses)
    return out


def compare(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    verdict: dict[str, Any] = {"flop_convention": FLOP_CONVENTION}
    if before.get("error") or after.get("error"):
        verdict["status"] = "crash"
        return verdict
    if before.get("peak_allocated_gib") and after.get("peak_allocated_gib"):
        verdict["memory_ratio"] = after["peak_allocated_gib"] / before["peak_allocated_gib"]
    runs = (("original", before), ("fixed", after))
    cannot = [f"the {name} run: {s['cannot_measure']}" for name, s in runs if s.get("cannot_measure")]
    if cannot:  # an impossible figure is never compared (nor printed)
        verdict["status"] = "cannot compare speed"
        verdict["speed"] = "cannot compare speed: " + "; ".join(cannot)
        return verdict
    b, a = before.get("real_tokens_per_s"), after.get("real_tokens_per_s")
    if b and a:
        verdict["speedup"] = a / b
        verdict["status"] = "slower" if a < b * (1 - NOISE) else "faster" if a > b * (1 + NOISE) else "same"
    return verdict


def _fmt(value: Any, pattern: str = "{:.3f}") -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return pattern.format(value)
    return str(value)


ROWS = [
    ("warm-up steps excluded", "warmup_steps_excluded", ""),
    ("median step (s)", "median_step_s", "{:.3f}"),
    ("real tokens/s", "real_tokens_per_s", "{:,.0f}"),
    ("supervised tokens/s", "supervised_tokens_per_s", "{:,.0f}"),
    ("MFU", "mfu", "{:.1%}"),
    ("peak allocated (GiB)", "peak_allocated_gib", "{:.1f}"),
    ("peak reserved (GiB)", "peak_reserved_gib", "{:.1f}"),
    ("loss first -> last", None, ""),
    ("attention", "attn_implementation", ""),
    ("s to train start", "train_begin_s", "{:.1f}"),
]


def table(before: dict[str, Any], after: dict[str, Any], verdict: dict[str, Any]) -> str:
    lines = [f"{'':24} {'original':>20} {'fixed':>20}"]
    for label, key, pattern in ROWS:
        if key is None:
            cells = [f"{_fmt(s.get('loss_first'))} -> {_fmt(s.get('loss_last'))}" for s in (before, after)]
        else:
            cells = [_fmt(s.get(key), pattern) if pattern else _fmt(s.get(key)) for s in (before, after)]
        lines.append(f"{label:24} {cells[0]:>20} {cells[1]:>20}")
    for name, s in (("original", before), ("fixed", after)):
        if s.get("error"):
            lines.append(f"{name} run crashed: {s['error']}")
        if s.get("cannot_measure"):
            lines.append(f"{name} run: cannot measure: {s['cannot_measure']}")
    unknown = dict.fromkeys(s["mfu_unknown"] for s in (before, after) if s.get("mfu_unknown"))
    lines.extend(f"no MFU: {why}" for why in unknown)  # one line where both runs have the same model
    device = before.get("device") or after.get("device")
    if device:
        lines.append(f"device: {device} ({before.get('platform') or after.get('platform')})")
    else:
        lines.append("device: not reached (no run got to its first training step)")
    if "speed" in verdict:
        lines.append(verdict["speed"])
    if "speedup" in verdict:
        lines.append(f"fixed vs original: {verdict['speedup']:.2f}x real tokens/s ({verdict['status']})")
    if "loss" in verdict:
        from cfgopt.verify.numerics import describe

        lines.extend(describe(verdict["loss"]))
    if any(s.get("mfu") is not None for s in (before, after)):  # the footnote explains a figure the table shows
        lines.append(FLOP_CONVENTION)
    return "\n".join(lines)


def plot(path: Path, runs: dict[str, dict[str, Any]]) -> bool:
    """tokens/s, allocated memory and loss per step for each run; False when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(16, 4))
    for label, metrics in runs.items():
        steps = metrics.get("steps") or []
        xs = [s["step"] for s in steps]
        if impossible(steps, metrics.get("capacity_tokens_per_step")) is None:  # never draw a refused figure
            ax1.plot(xs, [s["real_tokens"] / s["seconds"] for s in steps], marker="o", label=label)
        if steps and "allocated_gib" in steps[0]:
            ax2.plot(xs, [s["max_allocated_gib"] for s in steps], marker="o", label=label)
        losses = metrics.get("losses") or []
        ax3.plot([e["step"] for e in losses], [e["loss"] for e in losses], marker="o", label=label)
    ax1.set(title="real tokens/s per step", xlabel="step")
    ax2.set(title="peak allocated GiB (running)", xlabel="step")
    ax3.set(title="training loss per optimizer step", xlabel="step")
    for ax in (ax1, ax2, ax3):
        if ax.get_legend_handles_labels()[0]:  # a CPU run has no memory curve
            ax.legend()
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=110)
    plt.close(fig)
    write_new(path, png.getvalue())  # never through a link at the name
    return True


def to_json(before: dict[str, Any], after: dict[str, Any], verdict: dict[str, Any], extra: dict[str, Any]) -> str:
    return json.dumps({"original": before, "fixed": after, "comparison": verdict, **extra}, indent=2)
