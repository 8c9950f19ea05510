from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind


class ModelNameMissing(Rule):
    code = "LF032"
    name = "model-name-missing"
    severity = Severity.ERROR
    kinds = frozenset({Kind.LF_TRAIN, Kind.LF_INFER, Kind.LF_CLI})
    summary = "No `model_name_or_path`"
    why = (
        "Confidence: certain. LLaMA-Factory's ModelArguments refuse to be built without a model. A command line "
        'whose arguments an expansion may carry (`"$@"`, `$ARGS`, a config path `"$1"`) is not judged missing.'
    )
    fails_when = "At start-up: `ValueError: Please provide model_name_or_path`."
    evidence = ("llamafactory 0.9.5 hparams/model_args.py L207-208 (`ModelArguments.__post_init__`)",)
    example = "(no model_name_or_path)   ->  model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct"

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        if src.root is None or src.command.get("yaml") or src.command.get("open"):
            return  # a YAML is judged as its own file; an expansion (`"$@"`, `$ARGS`) may carry the model
        data = src.data if isinstance(src.data, dict) else {}
        if data.get("model_name_or_path") is None:
            entry = src.root.get("model_name_or_path")
            message = (
                "No `model_name_or_path`: LLaMA-Factory stops at start-up with `Please provide model_name_or_path`"
            )
            if entry is not None:
                yield self.at_entry(ctx, entry, message, on="value")
            else:
                yield self.at_node(ctx, src.root, message)
