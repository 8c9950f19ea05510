"""The loss (and grad norm) comparison of `cfgopt verify`: does the fixed config train like the original?

Both runs start from the same weights (the same local model, or the same cached random-init stand-in), the
same seed and the same data order: verify gives the fixed run the original's `seed`, `data_seed` and
`disable_shuffling` (`same_data_order`). Whether two optimizer steps can then be compared one to one depends
on what each step trains on (`batch_differences`):

- **per step** (same samples in each optimizer step): the global batch in samples (micro-batch x accumulation
  x GPUs), packing, cutoff length and data are equal, so step k of both runs trains on the same samples in the
  same order (a different micro-batch x accumulation split of the same global batch sees the same samples:
  the sampler's order is cut into consecutive global batches). On one GPU, the per-step token counts the
  worker measured must agree too. Compared: the relative difference (fixed - original) / |original| of the
  logged loss (and grad norm) at every step both logged.
- **smoothed** (steps not comparable one to one: packing, the global batch, the cutoff or the data changed):
  compared, the mean logged loss of the last quarter of the steps both ran (at least one step), the same
  window in both runs: loss at an equal number of optimizer updates. At equal tokens seen, the run with bigger
  steps has made fewer updates and its loss is higher for that reason alone (a packed 8B run reaches the
  original's 10 steps of tokens within its first step), so equal updates is the fairer clock; a plan that
  packs puts more tokens in each step, which tends to lower the loss per update (and so can hide a numerics
  regression: docs/verify.md says how to check the numerics change alone).

The verdict is one-sided and judged after the first transient: on the mean loss of the last half of the steps both
logged (the curve's area there), not on the largest single-step difference. The early steps of a random-init model
are chaotic (losses swing between 6 and 22 in steps 3-9 on the H200's synthetic runs): one of them differed by 18%
for torchao's 8-bit AdamW with stochastic rounding while the final loss matched to 0.03%. The fixed run fails when
that mean is higher than the original's by more than the tolerance, widened to twice the spread of the original
itself where verify measured it (the original run again with another seed, `--spread`: what a change that trains as
well may differ by), or when its loss is NaN / inf where the original's is finite (always a failure). The largest
single-step difference is still reported. A lower loss beyond the tolerance is reported (the numerics differ) but
passes: it does not train worse. When the steps are not comparable and the fixed run trained on fewer supervised
tokens per step than the original, a higher loss is what that alone gives: not judged. The grad norm is reported
(its largest relative difference), not judged: with fp16 loss scaling, skipped steps log inf by design.
"""

from __future__ import annotations

import math

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Measured on the H200 (bench/verify/results.md, "Numerics of the plan's knobs"; Qwen3-4B full SFT, 20 steps, same
# seed and samples): two identical runs differ by at most 0.019% per step (non-deterministic kernels), gradient
# checkpointing off by 0.015%, 8-bit AdamW (which trains as well) by +0.22% at most; pure bf16 (+48%) and Adafactor
# (+38%) train worse. Three times the noise (0.06%) would fail every optimizer change, 8-bit AdamW's too; 1% is
# four times the largest difference of a change that trains as well and 38 times below the smallest that does not.
# `--loss-tolerance` overrides it.
LOSS_TOLERANCE = 0.01
LOSS_TOLERANCE_SOURCE = (
    "measured on the H200: identical runs 0.019%, 8-bit AdamW +0.22%, pure bf16 +48%, Adafactor +38% "
    "(bench/verify/results.md)"
)
SMOOTHING_FRACTION = 4  # the smoothed window: the last quarter of the steps both runs logged
JUDGED_FRACTION = 2  # the judged window, after the first transient: the last half of the steps both runs logged
SPREAD_FACTOR = 2.0  # the tolerance widens to this many times the original's own spread (a second seed)
# What LLaMA-Factory puts in one optimizer step, besides the global batch (the keys a plan or a user's fixed
# config may change without touching the numerics)
_CONTENT_KEYS = (
    "cutoff_len",
    "dataset",
    "template",
    "max_samples",
    "mix_strategy",
    "train_on_prompt",
    "mask_history",
    "streaming",
    "group_by_length",
)
DATA_ORDER_KEYS = ("seed", "data_seed", "disable_shuffling")
NUMERICS_KEYS = ("bf16", "fp16", "pure_bf16", "optim")  # what a plan changes that changes the numerics


def numerics_changes(original: dict[str, Any], fixed: dict[str, Any]) -> list[str]:
    """The precision and optimizer keys the fixed config changes, as `key: value` (the fixed run's)."""
    return [f"{key}: {fixed.get(key)}" for key in NUMERICS_KEYS if original.get(key) != fixed.get(key)]


def numerics_alone_hint(changes: list[str]) -> str:
    """How to check a numerics change step by step when the plan also changed what each step trains on."""
    return (
        f"the steps are not comparable one to one, so a numerics change can hide behind the batch change: to "
        f"check it alone, step by step, verify against a copy of the original with only {', '.join(changes)} "
        "(--fixed)"
    )


def same_data_order(original_values: dict[str, Any]) -> dict[str, Any]:
    """The data-order keys of the original run (LLaMA-Factory's values, defaults filled), given to both runs:
    the same seed (model init of what is new, dropout) and the same sampler order."""
    seed = original_values.get("seed")
    order = {
        "seed": 42 if seed is None else seed,  # the HF Trainer's default
        "data_seed": original_values.get("data_seed"),  # None: the sampler follows `seed`
    }
    if original_values.get("disable_shuffling"):  # set only where used: a release without the key refuses it
        order["disable_shuffling"] = True
    return order


def with_data_order(config: dict[str, Any], order: dict[str, Any]) -> dict[str, Any]:
    """A run's config given the original's data order (`same_data_order`)."""
    out = {**config, **order}
    if "disable_shuffling" in config and "disable_shuffling" not in order:
        out["disable_shuffling"] = False
    return out


def batch_content(values: dict[str, Any], gpus: int) -> dict[str, Any]:
    """What each optimizer step trains on, as the config states it (`values`: LLaMA-Factory's, defaults
    filled)."""
    from cfgopt.knowledge.packing import packing_on

    micro = values.get("per_device_train_batch_size") or 1
    accumulation = values.get("gradient_accumulation_steps") or 1
    return {
        "global batch (samples)": micro * accumulation * gpus,
        "packing": packing_on(values),
        "neat packing": bool(values.get("neat_packing")),
        **{key: values.get(key) for key in _CONTENT_KEYS},
    }


def batch_differences(original: dict[str, Any], fixed: dict[str, Any]) -> list[str]:
    """What differs in the steps' content, in words ("packing False -> True"); empty: the same samples."""
    return [f"{key} {original[key]} -> {fixed.get(key)}" for key in original if original[key] != fixed.get(key)]


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def _by_step(metrics: dict[str, Any], key: str) -> dict[int, float]:
    return {int(e["step"]): float(e[key]) for e in metrics.get("losses") or [] if e.get(key) is not None}


def _relative(fixed: float, original: float) -> float:
    return (fixed - original) / max(abs(original), 1e-12)


def _counts_differ(original: dict[str, Any], fixed: dict[str, Any], steps: list[int]) -> bool:
    """On one process the worker counts every token of a step: different counts, different samples."""

    def counts(metrics: dict[str, Any]) -> dict[int, tuple[int, int]]:
        return {s["step"]: (s.get("real_tokens"), s.get("supervised_tokens")) for s in metrics.get("steps") or []}

    a, b = counts(original), counts(fixed)
    return any(step in a and step in b and a[step] != b[step] for step in steps)


def _supervised_per_step(metrics: dict[str, Any]) -> float | None:
    steps = metrics.get("steps") or []
    return sum(s.get("supervised_tokens", 0) for s in steps) / len(steps) if steps else None


def compare(
    original: dict[str, Any],
    fixed: dict[str, Any],
    differences: list[str],
    tolerance: float = LOSS_TOLERANCE,
    one_process: bool = True,
    spread: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The loss verdict of two runs' worker metrics ("losses": [{"step", "loss", "grad_norm"}], "steps": the
    per-step token counts). `differences`: `batch_differences` of their configs; `one_process`: the token
    counts cover the whole step (one GPU), so they can confirm the steps saw the same samples."""
    losses_o, losses_f = _by_step(original, "loss"), _by_step(fixed, "loss")
    out: dict[str, Any] = {"tolerance": tolerance, "tolerance_source": LOSS_TOLERANCE_SOURCE}
    out["batch_differences"] = list(differences)
    if not losses_o or not losses_f:
        return {**out, "status": "not measured", "passed": True, "reason": "a run logged no loss"}
    common = sorted(set(losses_o) & set(losses_f))
    out["steps_logged"] = {"original": len(losses_o), "fixed": len(losses_f)}
    bad = [s for s in sorted(losses_f) if not _finite(losses_f[s])]
    original_bad = [s for s in sorted(losses_o) if not _finite(losses_o[s])]
    if bad and not original_bad:
        out.update(status="non-finite", passed=False, step=bad[0])
        out["reason"] = f"the fixed run's loss is {losses_f[bad[0]]} at step {bad[0]}; the original's is finite"
        return out
    common = [s for s in common if _finite(losses_o[s]) and _finite(losses_f[s])]
    if not common:
        return {**out, "status": "not measured", "passed": True, "reason": "no step with a finite loss in both"}
    if not differences and one_process and _counts_differ(original, fixed, common):
        out["batch_differences"] = ["the steps trained on different token counts (measured)"]
    out["method"] = "smoothed" if out["batch_differences"] else "per step"
    if original_bad:
        out["notes"] = [f"the original's loss is also non-finite (step {original_bad[0]}): finite steps compared"]
    if out["method"] == "per step":
        _per_step(out, losses_o, losses_f, common, _by_step(original, "grad_norm"), _by_step(fixed, "grad_norm"))
    else:
        _smoothed(out, original, fixed, common)
    _after_transient(out, losses_o, losses_f, common)
    return _judge(out, _widened(out, tolerance, losses_o, spread, common))


def judged_window(common: list[int]) -> list[int]:
    """The steps judged: the last half of those both runs logged (at least one), after the first transient."""
    return common[-max(1, len(common) // JUDGED_FRACTION) :]


def _after_transient(out: dict, losses_o: dict[int, float], losses_f: dict[int, float], common: list[int]) -> None:
    """The judged figure: the relative difference of the mean losses over the judged window."""
    window = judged_window(common)
    mean_o, mean_f = _mean([losses_o[s] for s in window]), _mean([losses_f[s] for s in window])
    out["judged_window"] = [window[0], window[-1]]
    out["judged_excess"] = _relative(mean_f, mean_o) if mean_o is not None and mean_f is not None else 0.0


def _widened(
    out: dict, tolerance: float, losses_o: dict[int, float], spread: dict[str, Any] | None, common: list[int]
) -> float:
    """The tolerance, widened to SPREAD_FACTOR x the original's own spread over the judged window where a second
    run of the original (another seed) was measured."""
    if spread is None:
        return tolerance
    losses_s = {s: v for s, v in _by_step(spread, "loss").items() if _finite(v)}
    window = [s for s in judged_window(common) if s in losses_s]
    if not window:
        out.setdefault("notes", []).append("the original's second run logged no step of the judged window")
        return tolerance
    own = abs(_relative(_mean([losses_s[s] for s in window]), _mean([losses_o[s] for s in window])))
    out["spread"] = own
    widened = max(tolerance, SPREAD_FACTOR * own)
    out["tolerance"] = widened
    return widened


def _largest(diffs: dict[int, float]) -> tuple[int, float] | None:
    finite = {s: d for s, d in diffs.items() if _finite(d)}
    return max(finite.items(), key=lambda item: abs(item[1])) if finite else None


def _per_step(out: dict, losses_o: dict, losses_f: dict, common: list[int], grad_o: dict, grad_f: dict) -> None:
    diffs = {s: _relative(losses_f[s], losses_o[s]) for s in common}
    out["steps_compared"] = len(common)
    out["max_rel_diff_step"], out["max_rel_diff"] = _largest(diffs) or (None, 0.0)
    out["max_excess"] = max(diffs.values())  # the fixed run's loss highest above the original's
    out["max_excess_step"] = max(diffs, key=lambda s: diffs[s])
    grads = {s: _relative(grad_f[s], grad_o[s]) for s in common if s in grad_o and s in grad_f and grad_o[s]}
    if largest := _largest(grads):
        out["grad_norm_max_rel_diff_step"], out["grad_norm_max_rel_diff"] = largest
    out["grad_norm_non_finite"] = {
        "original": sum(not _finite(v) for v in grad_o.values()),
        "fixed": sum(not _finite(v) for v in grad_f.values()),
    }


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _smoothed(out: dict, original: dict, fixed: dict, common: list[int]) -> None:
    window = common[-max(1, len(common) // SMOOTHING_FRACTION) :]
    losses_o, losses_f = _by_step(original, "loss"), _by_step(fixed, "loss")
    out["steps_compared"] = len(common)
    out["window"] = [window[0], window[-1]]
    out["original_mean_loss"] = _mean([losses_o[s] for s in window])
    out["fixed_mean_loss"] = _mean([losses_f[s] for s in window])
    out["max_rel_diff"] = out["max_excess"] = _relative(out["fixed_mean_loss"], out["original_mean_loss"])
    grad_o, grad_f = _by_step(original, "grad_norm"), _by_step(fixed, "grad_norm")
    mean_o = _mean([grad_o[s] for s in window if _finite(grad_o.get(s))])
    mean_f = _mean([grad_f[s] for s in window if _finite(grad_f.get(s))])
    if mean_o and mean_f is not None:
        out["grad_norm_max_rel_diff"] = _relative(mean_f, mean_o)
    out["supervised_tokens_per_step"] = {
        "original": _supervised_per_step(original),
        "fixed": _supervised_per_step(fixed),
    }


def _judge(out: dict, tolerance: float) -> dict:
    excess = out["judged_excess"]
    largest = min(excess, out["max_rel_diff"]) if out["method"] == "smoothed" else excess
    if excess > tolerance:
        tokens = out.get("supervised_tokens_per_step") or {}
        fewer = out["method"] == "smoothed" and (tokens.get("fixed") or 0) < (tokens.get("original") or 0)
        if fewer:
            out.update(status="not judged", passed=True)
            out["reason"] = (
                "the fixed run trained on fewer supervised tokens per step: a higher loss per step is what that "
                "alone gives, so it says nothing of the numerics"
            )
        else:
            out.update(status="diverges", passed=False)
            window = out["judged_window"]
            out["reason"] = (
                f"the fixed run's mean loss over steps {window[0]}-{window[1]} is {excess:+.2%} above the original's"
            )
    elif largest < -tolerance:
        out.update(status="lower", passed=True)
        out["reason"] = f"the fixed run's loss is {largest:+.2%} below the original's: the numerics differ, not worse"
    else:
        out.update(status="within", passed=True)
        out["reason"] = "the fixed run's loss stays within the tolerance of the original's"
    return out


def describe(verdict: dict[str, Any]) -> list[str]:
    """The comparison in the text report's words."""
    if verdict.get("status") in (None, "not measured"):
        return [f"loss comparison: not measured ({verdict.get('reason', 'no fixed run')})"]
    tolerance = f"tolerance {verdict['tolerance']:.2%}"
    if "spread" in verdict:
        tolerance += f", {SPREAD_FACTOR:g} x the original's own spread {verdict['spread']:.2%} (a second seed)"
    if verdict["status"] == "non-finite":
        return [f"loss comparison: FAILS: {verdict['reason']}"]
    if verdict["method"] == "per step":
        head = (
            f"loss comparison, per step (same samples in each of {verdict['steps_compared']} steps): largest "
            f"relative difference {verdict['max_rel_diff']:+.2%} at step {verdict['max_rel_diff_step']}"
        )
    else:
        window = verdict["window"]
        head = (
            f"loss comparison, smoothed (steps not comparable one to one: {'; '.join(verdict['batch_differences'])})"
            f": mean loss of steps {window[0]}-{window[1]} {verdict['fixed_mean_loss']:.4f} fixed vs "
            f"{verdict['original_mean_loss']:.4f} original ({verdict['max_rel_diff']:+.2%})"
        )
    lines = [head]
    if "grad_norm_max_rel_diff" in verdict:
        grad = f"{verdict['grad_norm_max_rel_diff']:+.2%}"
        if verdict["method"] == "per step":
            grad = f"largest relative difference {grad} at step {verdict['grad_norm_max_rel_diff_step']}"
        else:
            grad = f"mean of the same steps {grad}"
        lines.append(f"grad norm: {grad} (reported, not judged)")
    if "judged_window" in verdict:
        window = verdict["judged_window"]
        lines.append(
            f"judged after the first transient: mean loss of steps {window[0]}-{window[1]} "
            f"{verdict['judged_excess']:+.2%} (single steps are reported, not judged)"
        )
    lines.extend(verdict.get("notes") or [])
    word = {"within": "passes", "lower": "passes (lower loss)", "diverges": "FAILS", "not judged": "not judged"}
    lines.append(f"loss verdict: {word.get(verdict['status'], verdict['status'])}: {verdict['reason']} ({tolerance})")
    return lines
