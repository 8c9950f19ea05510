from __future__ import annotations

from collections.abc import Iterator

from cfgopt.loaders import edits
from cfgopt.rules.base import Context, Rule
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind


class QuantizedDeviceMapInTraining(Rule):
    code = "LF033"
    name = "device-map-in-training"
    severity = Severity.ERROR
    kinds = frozenset({Kind.LF_TRAIN, Kind.LF_CLI})
    triggers = frozenset({"quantization_device_map"})
    summary = "`quantization_device_map: auto` in a training config"
    why = (
        "Confidence: certain. `quantization_device_map: auto` spreads a quantized model over devices for "
        "inference; LLaMA-Factory refuses it for training, whether or not `quantization_bit` is set."
    )
    fails_when = "At start-up: `Cannot use device map for quantized models in training`."
    evidence = ("llamafactory 0.9.5 hparams/parser.py L374-375",)
    example = "quantization_device_map: auto   ->  (removed)"
    fix_safety = "Safe: removing it is the only way the training config runs, and it never affects training."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        entry = src.root.get("quantization_device_map") if src.root is not None else None
        data = src.data if isinstance(src.data, dict) else {}
        if entry is None or entry.node.value != "auto" or not data.get("do_train"):
            return  # the check applies only when training (do_train defaults to false)
        yield self.at_entry(
            ctx,
            entry,
            "`quantization_device_map: auto` while training: LLaMA-Factory stops at "
            "start-up with `Cannot use device map for quantized models in training`",
            fix=self.fix("Remove `quantization_device_map`", edits.delete_entry(src, entry), safe=True),
        )
