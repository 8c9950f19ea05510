from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.requirements import CHECKED, DECLARED, admitted, exact_version, pins_of
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind


class OutsideLlamafactoryRange(Rule):
    code = "ENV002"
    name = "outside-llamafactory-range"
    severity = Severity.WARNING
    kinds = frozenset({Kind.REQUIREMENTS})
    triggers = frozenset({"transformers", "datasets", "accelerate", "peft", "trl", "deepspeed", "torch"})
    summary = "An exact pin outside the range the selected LLaMA-Factory release checks or declares"
    why = (
        "Confidence: certain (what the release checks). Each LLaMA-Factory release checks five dependencies at "
        "start-up (`check_dependencies`: transformers, datasets, accelerate, peft, trl) and stops with `To fix: "
        "run pip install ...` when one is outside its range, unless `DISABLE_VERSION_CHECK=1` is set; it also "
        "declares a torch floor, a DeepSpeed range for its `deepspeed` extra and (0.9.4+) dependency ranges that "
        "can be narrower than the check, which pip resolves but nothing checks at run time (outside them pip "
        "refuses the set with LLaMA-Factory in it, or the combination is untested). Judged for the release "
        "cfgopt selects (`--llamafactory-version`, the repository's own pins, else the installed one), on exact "
        "pins only (`==`, lock files): a range leaves the choice to pip. A warning, not an error: the file may "
        "not be what the node has installed (`cfgopt doctor` reads that)."
    )
    fails_when = (
        "transformers / datasets / accelerate / peft / trl: at start-up (`check_dependencies`) unless "
        "DISABLE_VERSION_CHECK=1; torch / DeepSpeed: pip's resolver refuses the set, or an untested combination."
    )
    evidence = (
        "LLaMA-Factory src/llamafactory/extras/misc.py `check_dependencies` at tags v0.9.0 (lines 82-86), v0.9.1 "
        "(83-87), v0.9.2 (97-101), v0.9.3 (97-103), v0.9.4 (97-101), v0.9.5 (97-101)",
        "LLaMA-Factory setup.py extras (v0.9.0-v0.9.3), pyproject.toml (v0.9.4: `deepspeed>=0.10.0,<=0.16.9`, "
        "`torch>=2.4.0`), requirements/deepspeed.txt (v0.9.5: `deepspeed>=0.10.0,<=0.18.4`)",
        "LLaMA-Factory pyproject.toml [project] dependencies at v0.9.4 (lines 44-48) and v0.9.5 (lines 43-47): "
        "narrower than the check for transformers, accelerate and peft",
    )
    example = "transformers==4.46.1   # LLaMA-Factory 0.9.5 checks transformers>=4.55.0,<=5.6.0"
    fix_safety = "No fix: which version in the range suits the rest of the environment is the user's choice."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        release = ctx.settings.llamafactory_version
        checked, declared = CHECKED.get(release, {}), DECLARED.get(release, {})
        for entry in pins_of(ctx, frozenset(checked) | frozenset(declared)):
            version = exact_version(str(entry.node.value))
            if version is None:
                continue
            if entry.key in checked and not admitted(entry.key, checked[entry.key], version):
                message = (
                    f"`{entry.key} {version}` is outside {ctx.lf_label}'s check ({entry.key}{checked[entry.key]}): "
                    "it stops at start-up unless DISABLE_VERSION_CHECK=1"
                )
                yield self.at_entry(ctx, entry, message, on="value")
            elif entry.key in declared and not admitted(entry.key, declared[entry.key], version):
                message = (
                    f"`{entry.key} {version}` is outside the range {ctx.lf_label} declares "
                    f"({entry.key}{declared[entry.key]}): pip refuses the set or the combination is untested"
                )
                yield self.at_entry(ctx, entry, message, on="value")
