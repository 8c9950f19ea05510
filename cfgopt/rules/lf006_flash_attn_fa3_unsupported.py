from __future__ import annotations

from collections.abc import Iterator

from cfgopt.loaders import edits
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import entry_of, value_of
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind


class FlashAttnFa3Unsupported(Rule):
    code = "LF006"
    name = "flash-attn-fa3-unsupported"
    severity = Severity.ERROR
    kinds = frozenset({Kind.LF_TRAIN, Kind.LF_INFER, Kind.LF_CLI})
    triggers = frozenset({"flash_attn=fa3"})
    summary = "`flash_attn: fa3` is accepted by the parser but LLaMA-Factory 0.9.5 has no FA3 branch"
    why = (
        "Confidence: certain. `fa3` is a member of the `AttentionFunction` enum, so the parser and the command "
        "line accept it, but `configure_attn_implementation` in 0.9.5 only handles auto, disabled, sdpa and fa2 "
        "and raises for anything else. Only gpt-oss models are special-cased (a hub FA3 kernel is forced before "
        "the check). A real FA3 branch arrived after 0.9.5 (commit 199b8873d, 2026-08-13)."
    )
    fails_when = (
        "At model load, after the dataset has been tokenised: `NotImplementedError: Unknown attention type: fa3`."
    )
    evidence = (
        "llamafactory 0.9.5 model/model_utils/attention.py L64-86 (no FA3 branch; `raise NotImplementedError`)",
        "llamafactory 0.9.5 model/model_utils/attention.py L34-44 (gpt_oss forces a FA3 hub kernel first)",
        "docs/evidence/llamafactory.md §1.4 (reproduced with the 0.9.5 parser)",
    )
    example = "flash_attn: fa3   ->  flash_attn: sdpa"
    fix_safety = (
        "Unsafe: `sdpa` is the flash-backed attention present on every GPU target without an extra package; "
        "choose `fa2` yourself when a flash-attn build is installed."
    )

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        entry = entry_of(ctx, "flash_attn")
        if entry is None or entry.node.value != "fa3":
            return
        model = str(value_of(ctx, "model_name_or_path") or "").lower().replace("_", "-")
        if "gpt-oss" in model:
            return
        yield self.at_entry(
            ctx,
            entry,
            f"`flash_attn: fa3` passes the parser, but {ctx.lf_label} has no FA3 path: model load fails with "
            "`NotImplementedError: Unknown attention type: fa3` (after tokenisation)",
            on="value",
            fix=self.fix("Use `sdpa`", edits.replace_value(ctx.source, entry, "sdpa"), safe=False),
        )
