from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import TRAIN_KINDS, is_set, on, report, training, value_of
from cfgopt.text.diagnostics import Diagnostic, Severity

# Below this expected gain on the job's own data, packing is not worth its change of meaning (the plan's bar for a
# package, cfgopt.plan.planner._WORTH_A_PACKAGE, is the same 5%).
WORTH_PACKING = 1.05


class PackingOff(Rule):
    code = "PF006"
    name = "packing-off"
    severity = Severity.INFO
    kinds = TRAIN_KINDS
    summary = "SFT without packing: short samples are padded, most of each batch is padding"
    why = (
        "Confidence: contested in general, likely for short-sample SFT (measured). Without packing every "
        "micro-batch is padded to its longest sample. On an H200 (8B LoRA, Alpaca-like data, median 144 tokens, "
        "cutoff 2048) `packing: true` gave 3.86x the tokens/s of the 4x4 unpacked default. Packing drops samples "
        "longer than `cutoff_len` (not truncated) and lets packed samples attend to each other; `neat_packing` "
        "avoids the latter (needs fa2 to be fast, see PF005). What settles it: the dataset's mean sample length "
        "against `cutoff_len` (a gain only when samples are much shorter): where the job's dataset is local, the "
        "message gives the gain expected on it (padding measured, cfgopt/plan/data_speed.py), and the rule is "
        "silent below 1.05x."
    )
    fails_when = "Never fails: slower; the gain depends on the dataset's length distribution."
    evidence = (
        "bench/h200/measurements.md V6 vs V4 (7,762 vs 2,011 real tokens/s, 3.86x)",
        "llamafactory 0.9.5 hparams/parser.py L527 (packing defaults to `stage == pt`)",
        "llamafactory 0.9.5 data/processor/supervised.py L173 ('Dropped lengthy example')",
    )
    worth_it = (
        "Info, never failing a run: whether packing pays depends on the sample lengths, which the linter reads only "
        "where the data is local. "
        "LLaMA-Factory's examples leave it off, so it is shown on most of them; the measured gain on short samples "
        "(3.86x) is why it is shown at all."
    )
    example = "stage: sft   (packing unset)  ->  packing: true"
    fix_replaced_by_plan = True  # the job's speed plan writes the fix (cfgopt/lint/plans.py)
    fix_safety = (
        "This rule writes no fix of its own. "
        "Unsafe: packing changes what each sample attends to, drops over-long samples and the step count."
    )

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        if not training(ctx) or value_of(ctx, "stage") != "sft":
            return
        if is_set(ctx, "packing") or on(ctx, "neat_packing") or on(ctx, "streaming"):
            return
        from cfgopt.plan.expected_speed import packing_gain_on_data  # only here: it loads tune's priors

        on_data = packing_gain_on_data(ctx.job)
        if on_data is None:
            said = "with short samples `packing: true` was 3.86x faster (H200, Alpaca-like data)"
        elif on_data[0] < WORTH_PACKING:
            return  # the job's own samples fill their micro-batches: packing would not pay
        else:
            gain, padding = on_data
            said = (
                f"on the job's own data ({padding}) `neat_packing: true` is expected {gain:.1f}x at the same "
                "micro-batch"
            )
        yield report(
            self,
            ctx,
            ("cutoff_len", "stage", "do_train"),
            f"SFT without packing pads every micro-batch to its longest sample; {said}{_not_planned(ctx)}",
        )


def _not_planned(ctx: Context) -> str:
    """Why the speed plan leaves packing off, where it has no memory estimate to judge it by (packing fills every row
    to `cutoff_len`: `plan.candidates.keep_memory_as_written`)."""
    from cfgopt.job.job import GPUS_IF_UNSTATED_SPEND

    gap = ctx.job.estimate_gap(ctx.job.hardware(GPUS_IF_UNSTATED_SPEND).gpus)
    if not gap:
        return ""
    if gap == "no target stated":
        gap += ": --target NAME"
    return f"; not planned: packing fills every row to `cutoff_len`, and no memory estimate says it fits ({gap})"
