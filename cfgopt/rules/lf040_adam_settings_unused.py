from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import TRAIN_KINDS, entry_of, is_train_group, on, value_of
from cfgopt.text.diagnostics import Diagnostic, Severity

ADAM_KEYS = ("adam_beta1", "adam_beta2", "adam_epsilon")
# HF `optim` values whose optimizer takes none of the Adam settings (trainer.py `get_optimizer_cls_and_kwargs`);
# Lion takes the betas but no epsilon.
WITHOUT_ADAM = ("sgd", "adagrad", "rmsprop", "adafactor", "lomo", "adalomo", "schedule_free_sgd")
WITHOUT_EPSILON = ("lion",)


class AdamSettingsUnused(Rule):
    code = "LF040"
    name = "adam-settings-unused"
    severity = Severity.WARNING
    kinds = TRAIN_KINDS
    triggers = frozenset(ADAM_KEYS)
    summary = "`adam_beta1` / `adam_beta2` / `adam_epsilon` with an `optim` that does not read them"
    why = (
        "Confidence: certain. The HF Trainer passes the `adam_*` settings only to the optimizers that take them "
        "(the AdamW family, Lion's betas); with `optim: sgd`, `adafactor`, `adagrad`, `rmsprop` or LOMO they are "
        "dropped without a word, so the tuning they hold never happens. Peer linters warn about the same pair."
    )
    fails_when = "Never: the settings are ignored."
    evidence = (
        "transformers 5.6.0 trainer.py `get_optimizer_cls_and_kwargs` (adam_kwargs only for Adam-style optimizers)",
    )
    example = "optim: sgd\nadam_beta2: 0.95   ->  drop adam_beta2, or use an AdamW optim"
    fix_safety = "No fix."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        if not is_train_group(ctx) or on(ctx, "use_galore") or on(ctx, "use_apollo") or on(ctx, "use_badam"):
            return
        optim = value_of(ctx, "optim")
        if not isinstance(optim, str):
            return
        if optim.startswith(WITHOUT_ADAM):
            unused = ADAM_KEYS
        elif any(name in optim for name in WITHOUT_EPSILON):  # lion_8bit, paged_lion_32bit, ...
            unused = ("adam_epsilon",)
        else:
            return
        for key in unused:
            entry = entry_of(ctx, key)
            if entry is not None:
                yield self.at_entry(
                    ctx,
                    entry,
                    f"`{key}` is not read by `optim: {optim}`: the Trainer drops it, the optimizer runs with its own "
                    "defaults",
                )
