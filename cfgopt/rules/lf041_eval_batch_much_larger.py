from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import TRAIN_KINDS, is_train_group, number, on, report, value_of
from cfgopt.text.diagnostics import Diagnostic, Severity

RATIO = 4  # an evaluation batch this many times the training one


class EvalBatchMuchLarger(Rule):
    code = "LF041"
    name = "eval-batch-much-larger"
    severity = Severity.WARNING
    kinds = TRAIN_KINDS
    triggers = frozenset({"do_eval", "eval_strategy"})  # no evaluation without one of them (defaults: off, "no")
    summary = "An evaluating run whose `per_device_eval_batch_size` is 4x or more the training micro-batch"
    why = (
        "Confidence: likely. Evaluation runs `per_device_eval_batch_size` sequences at once (HF default 8): with a "
        "training micro-batch of 1 or 2 chosen to fit memory, evaluation holds 4-8x the sequences and their "
        "full-vocabulary logits, and the run can stop out of memory at its first evaluation, after hours of "
        "training. LLaMA-Factory's examples set it equal to the training batch. Peers (Axolotl) check the pair."
    )
    fails_when = "At the first evaluation, when the larger batch does not fit (out of memory); otherwise never."
    evidence = (
        "transformers 5.6.0 training_args.py (`per_device_eval_batch_size` default 8)",
        "LLaMA-Factory examples/train_lora/*.yaml (`per_device_eval_batch_size: 1`)",
    )
    example = "per_device_train_batch_size: 1 (eval default 8), val_size: 0.1  ->  per_device_eval_batch_size: 1"
    fix_safety = "No fix: a smaller evaluation batch is slower; the user decides."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        if not is_train_group(ctx):
            return
        strategy = value_of(ctx, "eval_strategy")
        evaluates = on(ctx, "do_eval") or (isinstance(strategy, str) and strategy not in ("no", "none"))
        if not evaluates:
            return
        train = number(value_of(ctx, "per_device_train_batch_size"))
        evaluation = number(value_of(ctx, "per_device_eval_batch_size"))
        if not train or not evaluation or train <= 0 or evaluation < RATIO * train:
            return
        yield report(
            self,
            ctx,
            ("per_device_eval_batch_size", "per_device_train_batch_size"),
            f"evaluation runs {evaluation:g} sequences per GPU, {evaluation / train:g}x the training micro-batch "
            f"({train:g}): it can run out of memory at the first evaluation where training fits; consider "
            f"`per_device_eval_batch_size: {train:g}`",
        )
