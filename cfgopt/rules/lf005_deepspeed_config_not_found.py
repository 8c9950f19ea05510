from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind


class DeepSpeedConfigNotFound(Rule):
    code = "LF005"
    name = "deepspeed-config-not-found"
    severity = Severity.ERROR
    kinds = frozenset({Kind.LF_TRAIN, Kind.LF_CLI})
    triggers = frozenset({"deepspeed"})
    summary = "The `deepspeed` path names no file, or a file that is not JSON"
    why = (
        "The HF Trainer loads the DeepSpeed JSON when TrainingArguments are built. A path that does not exist "
        "is then tried as a base64 string and fails with a confusing error. The path is resolved against the "
        "launch directory; cfgopt cannot know it, so it looks in the current directory, the config's folder and "
        "every folder above it (LLaMA-Factory's examples assume the repository root) and reports only when the "
        "file is in none of them. A file that is found but is not JSON (a LLaMA-Factory YAML named by mistake) "
        "fails the same way, in the HF Trainer's `json.load`; it is reported here whether or not that file is "
        "itself linted. A file found outside the project (outside the folders named, the current folder and "
        "the config's repository, or hidden, or not a regular file) is not read and not reported here: cfgopt "
        "prints a note that it was not read, and never prints its content."
    )
    fails_when = "At start-up, when TrainingArguments are built (before data and model)."
    evidence = ("accelerate 1.11 utils/deepspeed.py `HfDeepSpeedConfig.__init__` (path, dict or base64)",)
    example = "deepspeed: examples/deepspeed/ds_z3_confg.json   ->  fix the path"

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        entry = src.root.get("deepspeed") if src.root is not None else None
        if entry is None or ctx.deepspeed is not None or not isinstance(entry.node.value, str):
            return
        if not entry.node.value or ctx.deepspeed_not_read:
            return  # found, but outside the project: a note says it was not read (never a false error)
        if ctx.deepspeed_invalid:
            yield self.at_entry(
                ctx, entry, f"DeepSpeed config `{entry.node.value}` {ctx.deepspeed_invalid}", on="value"
            )
            return
        tried = ctx.deepspeed_searched
        where = tried[0] if len(tried) == 1 else "the current directory, the config's folder and every folder above it"
        yield self.at_entry(
            ctx,
            entry,
            f"DeepSpeed config `{entry.node.value}` not found (looked in {where}); the HF Trainer stops at start-up",
            on="value",
        )
