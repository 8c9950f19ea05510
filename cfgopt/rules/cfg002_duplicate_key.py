from __future__ import annotations

from collections.abc import Iterator

from cfgopt.loaders import edits
from cfgopt.rules.base import Context, Rule
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind


class DuplicateKey(Rule):
    code = "CFG002"
    name = "duplicate-key"
    severity = Severity.ERROR
    kinds = frozenset({Kind.LF_TRAIN, Kind.LF_INFER, Kind.DEEPSPEED})
    summary = "A key appears twice in the same mapping"
    why = (
        "OmegaConf refuses a YAML mapping with a repeated key. For DeepSpeed JSON the two consumers disagree: "
        "the `deepspeed` launcher rejects it (`Duplicate keys in DeepSpeed config`), while the HF Trainer's "
        "`json.load` silently keeps the last value, so the file means different things depending on how the "
        "job is launched."
    )
    fails_when = "At start-up (OmegaConf, DeepSpeed launcher); silently under the HF Trainer."
    evidence = (
        "omegaconf 2.4 _yaml.py `flatten_mapping`: 'found duplicate key'",
        "deepspeed 0.19.8 runtime/config.py `dict_raise_error_on_duplicate_keys`",
    )
    example = "lora_rank: 8\nlora_rank: 16   ->  keep one"
    fix_safety = (
        "JSON: deleting the earlier member is safe, since the HF Trainer already uses the last one. "
        "YAML: unsafe, because the real tool used neither value and cfgopt cannot know which one was meant."
    )

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source

        def visit(node) -> Iterator[Diagnostic]:
            seen = {}
            for entry in node.entries or ():
                if not entry.key_is_str:
                    continue  # `1:` / `yes:` repeated: OmegaConf keeps the last one, no error
                if entry.key in seen:
                    first = seen[entry.key]
                    line, _ = src.document.position(first.key_start)
                    fix = self.fix(
                        f"Remove the earlier `{entry.key}` (line {line})",
                        edits.delete_entry(src, first),
                        safe=src.kind == Kind.DEEPSPEED,
                    )
                    yield self.at_entry(
                        ctx,
                        entry,
                        f"`{entry.dotted}` is repeated (first on line {line}); "
                        + (
                            "the DeepSpeed launcher rejects the file and the HF Trainer keeps the last"
                            if src.kind == Kind.DEEPSPEED
                            else "OmegaConf rejects the file"
                        ),
                        fix=fix,
                    )
                seen[entry.key] = entry
                yield from visit(entry.node)
            for item in node.items or ():
                yield from visit(item)

        if src.root is not None:
            yield from visit(src.root)
