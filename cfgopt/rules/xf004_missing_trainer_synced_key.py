from __future__ import annotations

from collections.abc import Iterator

from cfgopt.loaders import edits
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.cross_file import lf_value
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind
from cfgopt.text.user_text import is_int, is_number


class MissingTrainerSyncedKey(Rule):
    code = "XF004"
    name = "missing-trainer-synced-key"
    severity = Severity.WARNING
    kinds = frozenset({Kind.DEEPSPEED})
    summary = (
        "No `gradient_clipping` (max_grad_norm ignored), or no `gradient_accumulation_steps` next to "
        "`train_batch_size` and `train_micro_batch_size_per_gpu` (the run stops), in a DeepSpeed JSON a "
        "LLaMA-Factory config uses"
    )
    why = (
        "Confidence: certain (clipping: code reading; accumulation: measured on an H200, bench/xf004/). The HF "
        "Trainer only fills or checks keys that exist. Without `gradient_clipping` DeepSpeed clips at its own "
        "default, which the selected release's snapshot gives (1.0 since 0.19.3; 0.0, no clipping, before), and "
        "LLaMA-Factory's `max_grad_norm` is silently ignored (reported when it differs from that default; the "
        "version drift of the default itself is DS090's). Without `gradient_accumulation_steps` accelerate's "
        "DeepSpeedPlugin writes 1 into the DeepSpeed config; with `train_batch_size` and "
        '`train_micro_batch_size_per_gpu` both present ("auto" is filled with the real accumulation first) '
        "DeepSpeed's batch assertion then stops the run. With `train_batch_size` but no micro batch key, "
        'accelerate fills no micro batch (it fills only an "auto" one) and DeepSpeed derives it as '
        "`train_batch_size` / GPUs / 1, so the assertion holds and the run goes on, training as the config says "
        '(measured on the CPU: the same losses and weights as with "auto"); only DeepSpeed\'s own micro-batch and '
        "accumulation counters are off, reported as an info. Without "
        "`train_batch_size` the run is NOT changed, and the rule says nothing: accelerate 1.11's "
        "`DeepSpeedEngineWrapper.backward` sets DeepSpeed's accumulation boundary from `sync_gradients`, which "
        "the Trainer drives with its own accumulation, and the Trainer scales the loss itself "
        "(`scale_wrt_gas=False`). Measured (ZeRO-2, accumulation 4, 12 micro-batches): 3 optimizer steps and "
        'the same losses and weights as with `"auto"`; only DeepSpeed\'s own counters (its '
        "`train_batch_size()`, `global_samples`) say 1: every micro-batch does NOT become an "
        "optimizer step."
    )
    fails_when = (
        "Missing accumulation with `train_batch_size` and `train_micro_batch_size_per_gpu` present and "
        "accumulation > 1: at `deepspeed.initialize` (`AssertionError: Check batch related parameters ... "
        "8 != 2 * 1 * 1`, measured). With `train_batch_size` alone: never (measured). Missing clipping: never "
        "fails; the run clips at DeepSpeed's default instead of `max_grad_norm`."
    )
    evidence = (
        "deepspeed 0.19.8 runtime/constants.py:202-203 (GRADIENT_CLIPPING_DEFAULT = 1.0; 0.0 up to 0.18.9), "
        "runtime/config.py:269",
        "transformers 5.6.0 integrations/deepspeed.py:140-158 (fills only present keys); trainer.py:1720-1722 "
        "(sync_gradients from the Trainer's accumulation), 1932-1935 (scale_wrt_gas=False)",
        "accelerate 1.11.0 utils/dataclasses.py:1237-1238 (missing gradient_accumulation_steps set to 1), "
        "utils/deepspeed.py:264-281 (DeepSpeedEngineWrapper.backward: boundary = sync_gradients), "
        "accelerator.py:2097-2123, 2144-2150, 2267 (`_prepare_deepspeed`: no micro batch key -> None, no batch "
        'kwargs; only "auto" keys are filled)',
        "deepspeed 0.19.8 runtime/config.py:607-652 (`_set_batch_related_parameters`: no micro batch -> "
        "train_batch_size // world_size // accumulation), 590-605 (`_batch_assertion`)",
        "bench/xf004/README.md: H200 measurement (engine global_steps = Trainer global_step = 3 for 12 "
        "micro-batches, identical weights with and without the key; AssertionError with train_batch_size and the "
        'micro batch); CPU run `batch_only` (train_batch_size alone: trains as with "auto", engine micro 8)',
        "https://github.com/axolotl-ai-cloud/axolotl/issues/1381 (max_grad_norm ignored), DeepSpeed PR #8068",
    )
    example = 'max_grad_norm: 0.5, no "gradient_clipping"   ->  add "gradient_clipping": "auto"'
    fix_safety = 'Safe: "auto" makes DeepSpeed use the values the training config already states.'

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        if not ctx.consumers or src.root is None or not isinstance(src.data, dict):
            return
        lf = ctx.settings.lf_schema
        ds = ctx.settings.ds_schema
        data = src.data
        if "gradient_clipping" not in data:
            clip = float(ds.plain_defaults.get("gradient_clipping") or 0.0)
            norms = {c.document.path.name: lf_value(c, "max_grad_norm", lf) for c in ctx.consumers}
            differ = {n: v for n, v in norms.items() if not _same(v, clip)}
            if differ:
                name, value = next(iter(differ.items()))
                does = f"clips at its default {clip}" if clip else "does not clip (its default is 0.0)"
                yield self.at_node(
                    ctx,
                    src.root,
                    f"No `gradient_clipping`: DeepSpeed {ds.version} {does} and ignores "
                    f"`max_grad_norm` ({value} in {name})",
                    key="gradient_clipping",
                    fix=self.fix(
                        'Add "gradient_clipping": "auto"',
                        edits.insert_entry(src, None, "gradient_clipping", "auto"),
                        safe=True,
                    ),
                )
        if "gradient_accumulation_steps" not in data and "train_batch_size" in data:
            # Without `train_batch_size` a missing accumulation changes nothing (measured, bench/xf004/).
            steps = {c.document.path.name: lf_value(c, "gradient_accumulation_steps", lf) for c in ctx.consumers}
            bigger = {n: v for n, v in steps.items() if isinstance(v, int) and v > 1}
            if not bigger:
                return
            name, value = next(iter(bigger.items()))
            consumer = next(c for c in ctx.consumers if c.document.path.name == name)
            yield self._missing_accumulation(ctx, name, value, lf_value(consumer, "per_device_train_batch_size", lf))

    def _missing_accumulation(self, ctx: Context, name: str, accumulation: int, micro: object) -> Diagnostic:
        """`train_batch_size` without `gradient_accumulation_steps`: an error only next to a micro batch key."""
        src = ctx.source
        fix = self.fix(
            'Add "gradient_accumulation_steps": "auto"',
            edits.insert_entry(src, None, "gradient_accumulation_steps", "auto"),
            safe=True,
        )
        said = f"No `gradient_accumulation_steps` while {name} accumulates {accumulation}: accelerate writes 1"
        if "train_micro_batch_size_per_gpu" in src.data:
            return self.at_node(
                ctx,
                src.root,
                f"{said} into the DeepSpeed config, so next to `train_batch_size` and `train_micro_batch_size_per_gpu` "
                "DeepSpeed's check (train batch = micro batch x 1 x GPUs) fails: it stops with `Check batch related "
                "parameters`",
                key="gradient_accumulation_steps",
                severity=Severity.ERROR,
                fix=fix,
            )
        # No micro batch key: accelerate fills none, DeepSpeed derives it (train_batch_size / GPUs / 1) and its
        # assertion holds; the Trainer still drives the accumulation (measured: bench/xf004/, `batch_only`).
        derived = f" ({micro} x {accumulation} = {micro * accumulation} per GPU)" if is_int(micro) else ""
        return self.at_node(
            ctx,
            src.root,
            f"{said}, and with no `train_micro_batch_size_per_gpu` DeepSpeed derives its micro batch from "
            f"`train_batch_size`{derived}: the run trains as {name} says, only DeepSpeed's own counters show that "
            "micro batch and an accumulation of 1 (adding `train_micro_batch_size_per_gpu` without this key would "
            "stop the run at `deepspeed.initialize`)",
            key="gradient_accumulation_steps",
            severity=Severity.INFO,
            fix=fix,
        )


def _same(a: object, b: float) -> bool:
    return is_number(a) and float(a) == b
