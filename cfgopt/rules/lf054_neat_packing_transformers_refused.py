from __future__ import annotations

from collections.abc import Iterator

from cfgopt.knowledge.methods import neat_transformers_refused
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import TRAIN_KINDS, checking_releases, is_train_group, on, report, value_of
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.requirements.versions import exact_version

REFUSAL = "`ValueError: Neat packing is incompatible with transformers>=4.53.0.`"
# what keeps neat packing under 0.9.4: a transformers it allows (4.51.0 to 4.57.1, not 4.52.0) below 4.53
REMEDY = "pin `transformers>=4.51,<4.53,!=4.52.0`, or use a release without the check (0.9.5)"


class NeatPackingTransformersRefused(Rule):
    code = "LF054"
    name = "neat-packing-transformers-refused"
    severity = Severity.ERROR
    kinds = TRAIN_KINDS
    triggers = frozenset({"neat_packing"})
    summary = "`neat_packing` with transformers 4.53 or newer: LLaMA-Factory 0.9.4 refuses it at start-up"
    why = (
        "Confidence: certain where the transformers version is known. LLaMA-Factory 0.9.4's argument parser stops "
        "an SFT run that sets `neat_packing` when the installed transformers is 4.53.0 or newer, while 0.9.4 "
        "itself allows transformers up to 4.57.1 (which a fresh install takes). 0.9.3 (which allows transformers "
        "up to 4.52.4) and 0.9.5 have no such check. Judged for the release (the pin, `--llamafactory-version`, or "
        "every release the project's range allows: a warning where some of them do not check, and none where the "
        "environment's exact transformers is outside 0.9.4's own range, which pip then does not install) and for the "
        "transformers of the job's environment (its exact pin or installed version; a range that stays on one "
        "side of 4.53 decides too). Where the environment states no transformers version, or a range across "
        "4.53, a warning. The speed plan turns no neat packing on for such a job."
    )
    fails_when = f"At start-up, before tokenisation: {REFUSAL}"
    evidence = (
        "llamafactory 0.9.4 wheel: hparams/parser.py L359-360 (`get_train_args`), extras/packages.py L110-111 "
        "(`is_transformers_version_greater_than` is `>=`), extras/misc.py L97 (`transformers>=4.51.0,<=4.57.1`)",
        "llamafactory 0.9.3 wheel and 0.9.5: hparams/parser.py has no transformers check on `neat_packing`",
    )
    example = (
        "neat_packing: true   # llamafactory==0.9.4, transformers==4.57.1\n"
        "  ->  transformers>=4.51,<4.53,!=4.52.0 (or LLaMA-Factory 0.9.5)"
    )
    fix_safety = (
        "No fix: which transformers the node installs, or which release it runs, is the user's choice; plain "
        "`packing` in its place lets packed samples attend to each other."
    )

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        if not is_train_group(ctx) or not on(ctx, "neat_packing") or value_of(ctx, "stage") != "sft":
            return  # outside SFT 0.9.4 refuses neat packing first (LF010)
        env = ctx.job.environment
        spec = env.packages.get("transformers", "")
        refused = neat_transformers_refused(ctx.settings.llamafactory_releases, spec)
        if refused is None:
            return
        checked, certain = refused
        where = checking_releases(ctx, checked)
        release = "LLaMA-Factory" if where else ctx.lf_label  # a wider range: `where` names the releases
        if certain:
            version = exact_version(spec)
            stated = f"transformers {version}" if version else f"transformers{spec}"
            message = (
                f"`neat_packing` with {stated} ({env.where}): {release} stops at start-up with {REFUSAL}{where}; "
                f"{REMEDY}"
            )
        else:
            stated = f"allows transformers{spec}" if spec else "states no transformers version"
            message = (
                f"`neat_packing`: {release} stops at start-up with {REFUSAL} where transformers is 4.53 or newer"
                f"{where}, and {env.where} {stated} (a fresh install of 0.9.4 takes 4.57.1); {REMEDY}"
            )
        yield report(
            self,
            ctx,
            ("neat_packing",),
            message,
            severity=Severity.ERROR if certain and not where else Severity.WARNING,
        )
