from __future__ import annotations

from collections.abc import Iterator

from cfgopt.knowledge.schema import reads_yaml_with_pyyaml
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
        "OmegaConf refuses a YAML mapping with a repeated key (LLaMA-Factory 0.9.4 and newer; up to 0.9.3 it read "
        "YAML with PyYAML, which silently keeps the last value: a warning there). For DeepSpeed JSON the two "
        "consumers disagree: "
        "the `deepspeed` launcher rejects it (`Duplicate keys in DeepSpeed config`), while the HF Trainer's "
        "`json.load` silently keeps the last value, so the file means different things depending on how the "
        "job is launched."
    )
    fails_when = "At start-up (OmegaConf, DeepSpeed launcher); silently under the HF Trainer."
    evidence = (
        "omegaconf 2.4 _yaml.py `flatten_mapping`: 'found duplicate key'",
        "deepspeed 0.19.8 runtime/config.py `dict_raise_error_on_duplicate_keys`",
        "llamafactory 0.9.3 hparams/parser.py L65 `yaml.safe_load` (0.9.0-0.9.2: `HfArgumentParser.parse_yaml_file`): "
        "PyYAML's SafeConstructor keeps the last of repeated keys",
    )
    example = "lora_rank: 8\nlora_rank: 16   ->  keep one"
    fix_safety = (
        "JSON: deleting the earlier member is safe, since the HF Trainer already uses the last one. "
        "YAML: unsafe, because the real tool used neither value and cfgopt cannot know which one was meant; safe for "
        "a release that read YAML with PyYAML (it already used the last one)."
    )

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        # up to 0.9.3 LLaMA-Factory read a YAML file with PyYAML's safe_load: no duplicate check, the last one wins
        pyyaml = src.kind != Kind.DEEPSPEED and reads_yaml_with_pyyaml(ctx.settings.lf_schema.version)

        def visit(node) -> Iterator[Diagnostic]:
            seen = {}
            for entry in node.entries or ():
                if not entry.key_is_str:
                    continue  # `1:` / `yes:` repeated: OmegaConf keeps the last one, no error
                if entry.key in seen:
                    first = seen[entry.key]
                    line, _ = src.document.position(first.key_start)
                    last_wins = src.kind == Kind.DEEPSPEED or pyyaml
                    fix = self.fix(
                        f"Remove the earlier `{entry.key}` (line {line})",
                        edits.delete_entry(src, first),
                        safe=last_wins,
                    )
                    if src.kind == Kind.DEEPSPEED:
                        said = "the DeepSpeed launcher rejects the file and the HF Trainer keeps the last"
                    elif pyyaml:
                        said = (
                            f"{ctx.lf_label} reads YAML with PyYAML, which keeps the last value silently "
                            "(OmegaConf, from 0.9.4, rejects the file)"
                        )
                    else:
                        said = "OmegaConf rejects the file"
                    yield self.at_entry(
                        ctx,
                        entry,
                        f"`{entry.dotted}` is repeated (first on line {line}); {said}",
                        severity=Severity.WARNING if pyyaml else None,
                        fix=fix,
                    )
                seen[entry.key] = entry
                yield from visit(entry.node)
            for item in node.items or ():
                yield from visit(item)

        if src.root is not None:
            yield from visit(src.root)
