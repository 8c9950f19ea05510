from __future__ import annotations

from collections.abc import Iterator

from cfgopt import edits
from cfgopt.diagnostics import Diagnostic, Severity
from cfgopt.rules._xf import lf_value
from cfgopt.rules.base import Context, Rule
from cfgopt.source import Kind

DS_CLIP_DEFAULT = 1.0  # deepspeed 0.19.8 runtime/constants.py:203 (0.0 before 0.19.3)


class MissingTrainerSyncedKey(Rule):
    code = "XF004"
    name = "missing-trainer-synced-key"
    severity = Severity.WARNING
    kinds = frozenset({Kind.DEEPSPEED})
    summary = "No `gradient_clipping` / `gradient_accumulation_steps` in a DeepSpeed JSON a LLaMA-Factory config uses"
    why = (
        "Confidence: certain (clipping), likely (accumulation, code reading). The HF Trainer only fills or checks "
        "keys that exist. Without `gradient_clipping` DeepSpeed clips at its own default, 1.0 since 0.19.3 (0.0, "
        "no clipping, before), and LLaMA-Factory's `max_grad_norm` is silently ignored (reported when it is "
        "not 1.0; the version drift of the default itself is DS090's). Without "
        "`gradient_accumulation_steps` accelerate's DeepSpeedPlugin writes 1 and then overrides the Trainer's "
        "value ('Using DeepSpeed's value'): the run steps the optimizer every micro-batch, and if "
        '`train_batch_size` is present ("auto" is filled with the real accumulation first) DeepSpeed\'s batch '
        'assertion fails. `"auto"` lets the training config decide.'
    )
    fails_when = (
        "Missing accumulation with `train_batch_size` present and accumulation > 1: at `deepspeed.initialize` "
        "(`AssertionError: Check batch related parameters`). Otherwise silently."
    )
    evidence = (
        "deepspeed 0.19.8 runtime/constants.py:202-203 (GRADIENT_CLIPPING_DEFAULT = 1.0), runtime/config.py:269",
        "transformers 5.6.0 integrations/deepspeed.py:140-158 (fills only present keys)",
        "accelerate 1.11.0 utils/dataclasses.py:1237-1238 (missing gradient_accumulation_steps set to 1), "
        "accelerator.py:2125-2139 ('Gradient accumulation steps mismatch ... Using DeepSpeed's value')",
        "https://github.com/axolotl-ai-cloud/axolotl/issues/1381 (max_grad_norm ignored), DeepSpeed PR #8068",
    )
    example = 'max_grad_norm: 0.5, no "gradient_clipping"   ->  add "gradient_clipping": "auto"'
    fix_safety = 'Safe: "auto" makes DeepSpeed use the values the training config already states.'

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        if not ctx.consumers or src.root is None or not isinstance(src.data, dict):
            return
        lf = ctx.settings.lf_schema
        data = src.data
        if "gradient_clipping" not in data:
            norms = {c.document.path.name: lf_value(c, "max_grad_norm", lf) for c in ctx.consumers}
            differ = {n: v for n, v in norms.items() if not _same(v, DS_CLIP_DEFAULT)}
            if differ:
                name, value = next(iter(differ.items()))
                yield self.at_node(
                    ctx,
                    src.root,
                    f"No `gradient_clipping`: DeepSpeed clips at its default {DS_CLIP_DEFAULT} and ignores "
                    f"`max_grad_norm` ({value} in {name})",
                    key="gradient_clipping",
                    fix=self.fix(
                        'Add "gradient_clipping": "auto"',
                        edits.insert_entry(src, None, "gradient_clipping", "auto"),
                        safe=True,
                    ),
                )
        if "gradient_accumulation_steps" not in data:
            steps = {c.document.path.name: lf_value(c, "gradient_accumulation_steps", lf) for c in ctx.consumers}
            bigger = {n: v for n, v in steps.items() if isinstance(v, int) and v > 1}
            if not bigger:
                return
            name, value = next(iter(bigger.items()))
            fails = "train_batch_size" in data
            yield self.at_node(
                ctx,
                src.root,
                f"No `gradient_accumulation_steps` while {name} accumulates {value}: accelerate sets DeepSpeed's "
                "to 1 and overrides the Trainer's"
                + (
                    "; with `train_batch_size` filled for the real accumulation DeepSpeed's batch assertion fails"
                    if fails
                    else ", so every micro-batch becomes an optimizer step"
                ),
                key="gradient_accumulation_steps",
                severity=Severity.ERROR if fails else Severity.WARNING,
                fix=self.fix(
                    'Add "gradient_accumulation_steps": "auto"',
                    edits.insert_entry(src, None, "gradient_accumulation_steps", "auto"),
                    safe=True,
                ),
            )


def _same(a: object, b: float) -> bool:
    return isinstance(a, (int, float)) and not isinstance(a, bool) and float(a) == b
