from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import fields_for
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.patterns import lazy
from cfgopt.text.source import Kind

INTERPOLATION = lazy(r"\$\{[^}]*\}", needs=("${",))


class UnresolvedInterpolation(Rule):
    code = "LF026"
    name = "unresolved-interpolation"
    severity = Severity.WARNING
    kinds = frozenset({Kind.LF_TRAIN, Kind.LF_INFER})
    summary = "An OmegaConf `${...}` interpolation: LLaMA-Factory never resolves it, the text is used as it is"
    why = (
        "Confidence: certain. `read_args` calls `OmegaConf.to_container(...)` without `resolve=True`, so "
        "`output_dir: ${oc.env:HOME}/out` or `run_name: ${model}` reach the arguments as the literal text: an "
        "output folder literally named `${oc.env:HOME}`, a dataset name that does not exist, or (for a number "
        "field) a string that crashes later (LF002). Shell variables are not expanded in YAML either."
    )
    fails_when = "Usually never: the literal text is used; for number fields, where the value is first used."
    evidence = (
        "llamafactory 0.9.5 hparams/parser.py L85-99 (`OmegaConf.to_container(...)`, no resolve)",
        "docs/evidence/llamafactory.md §1.2 (verified: `f: ${a}` comes back as the string '${a}')",
    )
    example = "output_dir: ${oc.env:HOME}/saves   ->  output_dir: /home/me/saves"
    fix_safety = "No fix: cfgopt cannot know the value meant."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        fields = fields_for(ctx)
        for entry in ctx.source.walk():
            value = entry.node.value
            if not isinstance(value, str) or not INTERPOLATION.search(value):
                continue
            top = str(entry.path[0]) if entry.path else entry.key
            if top not in fields:
                continue
            yield self.at_entry(
                ctx,
                entry,
                f"`{entry.dotted}: {value}` is used literally: LLaMA-Factory does not resolve OmegaConf "
                "interpolations (nor shell variables)",
                on="value",
            )
