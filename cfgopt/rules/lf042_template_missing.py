from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import is_train_group, report, value_of
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.requirements.versions import version_key
from cfgopt.text.source import Kind

# The first release that picks a default template when none is named (0.9.0 and 0.9.1 stop).
FIRST_WITH_DEFAULT = (0, 9, 2)


class TemplateMissing(Rule):
    code = "LF042"
    name = "template-missing"
    severity = Severity.ERROR
    kinds = frozenset({Kind.LF_TRAIN, Kind.LF_INFER, Kind.LF_CLI})
    summary = "No `template` under LLaMA-Factory 0.9.0 / 0.9.1, which require one (but for `stage: pt`)"
    why = (
        "Confidence: certain. LLaMA-Factory 0.9.0 and 0.9.1 refuse a training config without a chat `template` "
        "unless `stage: pt`, and every chat / export config without one; 0.9.2 and later fall back to a default "
        "template. Only judged when one of those two releases is selected (`--llamafactory-version` or a pin)."
    )
    fails_when = "At start-up (`get_train_args` / `get_infer_args`): `Please specify which template to use.`"
    evidence = (
        "llamafactory 0.9.0 hparams/parser.py `get_train_args`, `get_infer_args`, `get_eval_args`",
        "confirmed with llamafactory 0.9.1 / transformers 4.46.1 (`get_train_args`)",
    )
    example = "(no template)   ->  template: llama3   (the model's chat template)"
    fix_safety = "No fix: the template depends on the model."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        version = ctx.settings.lf_schema.version
        if version_key(version)[:3] >= FIRST_WITH_DEFAULT or value_of(ctx, "template") is not None:
            return
        if ctx.source.command.get("open"):
            return  # an expansion or a YAML not read may name it
        if is_train_group(ctx) and value_of(ctx, "stage") == "pt":
            return
        yield report(
            self,
            ctx,
            ("stage", "model_name_or_path"),
            f"no `template`: LLaMA-Factory {version} stops at start-up (`Please specify which template to use.`); "
            "name the model's chat template (0.9.2 and later pick a default)",
        )
