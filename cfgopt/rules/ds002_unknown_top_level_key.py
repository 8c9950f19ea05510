from __future__ import annotations

from collections.abc import Iterator

from cfgopt import edits, suggest, versions
from cfgopt.diagnostics import Diagnostic, Severity
from cfgopt.rules.base import Context, Rule
from cfgopt.source import Kind


class UnknownTopLevelKey(Rule):
    code = "DS002"
    name = "unknown-top-level-key"
    severity = Severity.WARNING
    kinds = frozenset({Kind.DEEPSPEED})
    summary = "A top-level key DeepSpeed never reads: silently ignored"
    why = (
        "Outside its strict sections DeepSpeed reads keys one by one (`get_scalar_param`), so a misspelled or "
        "invented top-level key is dropped without a word: `zero_optimisation` silently means ZeRO off under the "
        "bare launcher. Keys starting with `_` are treated as comments and not reported."
    )
    fails_when = "Never: the setting just does not apply."
    evidence = (
        "deepspeed 0.19.8 runtime/config.py `DeepSpeedConfig._initialize_params` (plain dict reads)",
        "https://github.com/deepspeedai/DeepSpeed/issues/1809 (users asking for unknown-key validation)",
    )
    example = '"zero_optimisation": {...}   ->  "zero_optimization": {...}'
    fix_safety = "Unsafe: renaming to the closest key makes DeepSpeed start applying the block."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        ds = ctx.settings.ds_schema
        if src.root is None or not src.root.entries:
            return
        present = {e.key for e in src.root.entries}
        for entry in src.root.entries:
            key = entry.key
            if key in ds.top_level_keys or key in ds.removed_top_level or key.startswith("_"):
                continue
            if key == "timers.throughput":
                continue
            msg = f"`{key}` is not a key DeepSpeed {ds.version} reads: it is silently ignored"
            history = versions.ds_key_history(key, ds.version)
            if history:  # a real key of another release: say so before any spelling guess
                msg = f"{msg}; {history} (see `--deepspeed-version`)"
            guess = suggest.closest(key, ds.top_level_keys)
            if guess and guess not in present:
                yield self.at_entry(
                    ctx,
                    entry,
                    f"{msg}; did you mean `{guess}`?",
                    fix=self.fix(f"Rename to `{guess}`", edits.rename_key(src, entry, guess), safe=False),
                )
            else:
                yield self.at_entry(ctx, entry, msg)
