from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind


class UnsupportedKind(Rule):
    code = "CFG003"
    name = "unsupported-config-kind"
    severity = Severity.INFO
    kinds = frozenset({Kind.LF_V1, Kind.ACCELERATE})
    once_per_run = True  # a folder of v1 examples gets one note, not one per file
    summary = "A LLaMA-Factory v1 or Accelerate config: recognised, not yet checked"
    why = (
        "LLaMA-Factory's experimental v1 trainer (`examples/v1/`, `USE_V1=1`) and Accelerate launch configs "
        "(`examples/accelerate/`) have their own schemas. cfgopt recognises them so they are not mistaken for "
        "broken v0 configs, and says once per run that it does not check them yet (on the first such file, "
        "counting the others)."
    )
    fails_when = "Not applicable."
    evidence = ("LLaMA-Factory v0.9.5 examples/v1/ and examples/accelerate/",)
    worth_it = (
        "It fires on every LLaMA-Factory v1 and Accelerate file and on nothing else, by design: info that the "
        "file was recognised and not checked, so that silence is not read as a pass."
    )
    example = "model: Qwen/Qwen3-4B\npeft_config: {name: lora}   ->  info: v1 config, not checked"

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        what = "a LLaMA-Factory v1 config" if ctx.source.kind == Kind.LF_V1 else "an Accelerate launch config"
        root = ctx.source.root
        yield self.at_node(ctx, root, f"This is {what}; cfgopt does not check this kind yet")
