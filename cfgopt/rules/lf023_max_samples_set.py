from __future__ import annotations

from collections.abc import Iterator

from cfgopt.loaders import edits
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import TRAIN_KINDS, entry_of, on, training
from cfgopt.text.diagnostics import Diagnostic, Severity


class MaxSamplesSet(Rule):
    code = "LF023"
    name = "max-samples-set"
    severity = Severity.INFO
    kinds = TRAIN_KINDS
    triggers = frozenset({"max_samples"})
    summary = "`max_samples` in a training config: each dataset is cut to its first N examples"
    why = (
        "Confidence: likely (it is a debugging limit unless meant). LLaMA-Factory's examples carry "
        "`max_samples: 1000` (49 of them at HEAD); configs copied from them silently train on the first 1000 "
        "examples of each dataset, and the run looks healthy. The maintainer's answer to 'why only 1000 "
        "samples?' is to remove it (#7017, #5788). Keep it only if the subset is intended. Info, not a "
        "warning: whether the limit is a leftover depends on the data and the intent, which a linter cannot "
        "see, so it is shown without failing the default `--fail-on warning`."
    )
    fails_when = "Never fails: training sees only the first `max_samples` examples of every dataset."
    evidence = (
        "llamafactory 0.9.5 data/loader.py L157-159 (`dataset.select(range(max_samples))` per dataset)",
        "LLaMA-Factory issues #7017, #5788; docs/evidence/llamafactory.md §3 (49 examples set it)",
    )
    worth_it = (
        "It fires on most of the shared corpus because that corpus is LLaMA-Factory's own examples, the very "
        "files that carry the debugging limit; a config copied from one trains on 1000 examples per dataset "
        "without a word in the log. It is info, so it never fails a run at the default `--fail-on`; "
        "`per-file-ignores` keeps it off example folders."
    )
    example = "max_samples: 1000   ->  (removed)"
    fix_safety = (
        "Display-only: removing it trains on the whole dataset (longer run, different result), which only the user "
        "decides; `cfgopt fix` shows the edit and never applies it, `--unsafe-fixes` included."
    )

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        if not training(ctx) or on(ctx, "streaming"):
            return
        entry = entry_of(ctx, "max_samples")
        if entry is None or entry.node.value is None or isinstance(entry.node.value, bool):
            return
        value = entry.node.value
        small = not isinstance(value, (int, float)) or value <= 10000
        yield self.at_entry(
            ctx,
            entry,
            message=f"`max_samples: {value}` trains on only the first {value} examples of each dataset "
            + ("(a debugging limit copied from LLaMA-Factory's examples?)" if small else "(intended?)"),
            fix=self.fix("Remove `max_samples`", edits.delete_entry(ctx.source, entry), safe=False, display_only=True),
        )
