from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.deepspeed import hf_filled_keys
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind

# HF/accelerate fill the hidden-size keys only under their `stage3_` alias spelling.
ALIAS_OF = {
    "zero_optimization.prefetch_bucket_size": "zero_optimization.stage3_prefetch_bucket_size",
    "zero_optimization.param_persistence_threshold": "zero_optimization.stage3_param_persistence_threshold",
    "zero_optimization.gather_16bit_weights_on_model_save": (
        "zero_optimization.stage3_gather_16bit_weights_on_model_save"
    ),
}


class AutoNotFilled(Rule):
    code = "DS011"
    name = "auto-not-filled"
    severity = Severity.ERROR
    kinds = frozenset({Kind.DEEPSPEED})
    summary = '`"auto"` in a key neither the HF Trainer nor accelerate fills'
    why = (
        'Confidence: certain. DeepSpeed never resolves "auto"; the HF Trainer fills a fixed list of keys '
        "(batch sizes, accumulation, clipping, optimizer/scheduler params, fp16/bf16, the hidden-size bucket "
        "keys) and accelerate's DeepSpeedPlugin a few more (stage, offload devices and NVMe paths, "
        "`stage3_gather_16bit_weights_on_model_save`, `steps_per_print`). Accelerate then walks the whole "
        'config and raises for every "auto" left. The hidden-size keys are filled only under their `stage3_` '
        'spelling (`prefetch_bucket_size: "auto"` is not). Without a LLaMA-Factory config pointing to the file '
        'cfgopt cannot know the launcher: under the bare `deepspeed` launcher an "auto" inside a strict section '
        "silently becomes the field's default, so it is a warning there."
    )
    fails_when = (
        "At `trainer.train()` (accelerate `_prepare_deepspeed`), after data and model loading: "
        "``ValueError: `zero_optimization.sub_group_size` not found in kwargs. Please specify "
        "`zero_optimization.sub_group_size` without `auto` ...``."
    )
    evidence = (
        "accelerate 1.11.0 utils/dataclasses.py:1320-1336 `DeepSpeedPlugin.fill_match` (raises for an unfilled "
        '"auto"), :1243-1255 (plugin keys), accelerator.py:2267 `deepspeed_config_process` over the whole config',
        "transformers 5.6.0 integrations/deepspeed.py:133 `trainer_config_process`, :191 `trainer_config_finalize`",
        "https://github.com/huggingface/accelerate/issues/1644 (`sub_group_size: auto`), "
        "https://github.com/axolotl-ai-cloud/axolotl/pull/2964 (field-name spelling reverted)",
    )
    example = '"sub_group_size": "auto"   ->  "sub_group_size": 1000000000 (DeepSpeed\'s default)'
    fix_safety = "No fix: the value to write is the user's choice (DeepSpeed's default is given in the message)."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        filled = hf_filled_keys(ctx.settings.ds_schema)
        for entry in src.walk():
            if entry.node.value != "auto" or any(isinstance(p, int) for p in entry.path):
                continue
            dotted = entry.dotted
            if dotted in filled:
                continue
            hint = ""
            if dotted in ALIAS_OF:
                hint = f"; HF fills only the `{ALIAS_OF[dotted].split('.')[-1]}` spelling"
            if ctx.consumers:
                names = ", ".join(c.document.path.name for c in ctx.consumers)
                yield self.at_entry(
                    ctx,
                    entry,
                    f'`{dotted}` is "auto" but neither the HF Trainer nor accelerate fills it{hint}: '
                    f"training with {names} stops with `{dotted}` not found in kwargs",
                    on="value",
                )
            else:
                yield self.at_entry(
                    ctx,
                    entry,
                    f'`{dotted}` is "auto" but nothing fills it{hint}: accelerate (HF Trainer, LLaMA-Factory) '
                    "stops with `not found in kwargs`; the bare DeepSpeed launcher silently uses the default",
                    on="value",
                    severity=Severity.WARNING,
                )
