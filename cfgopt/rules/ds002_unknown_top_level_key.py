from __future__ import annotations

import math
from collections.abc import Iterator

from cfgopt.knowledge import schema, versions
from cfgopt.loaders import edits
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.deepspeed import validate_section
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


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
    fix_safety = (
        "Unsafe: renaming to the closest key makes DeepSpeed start applying the block. Offered only where the value "
        "is one DeepSpeed accepts under the new name (a strict section that validates, an object for a block, a "
        'value of the type DeepSpeed reads for a scalar): `"comment": "text"` is not renamed to `comet`, nor '
        '`"bf_16": true` to `bf16` (DeepSpeed stops on both).'
    )

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
            from cfgopt.text.suggest import closest  # only for an unknown name (start-up)

            guess = closest(key, ds.top_level_keys)
            if not guess or guess in present:
                yield self.at_entry(ctx, entry, msg)
            elif not accepted_as(ds, guess, entry.node.value):
                yield self.at_entry(ctx, entry, f"{msg}; `{guess}` is close but takes {takes(ds, guess)}")
            else:
                yield self.at_entry(
                    ctx,
                    entry,
                    f"{msg}; did you mean `{guess}`?",
                    fix=self.fix(f"Rename to `{guess}`", edits.rename_key(src, entry, guess), safe=False),
                )


def _block(ds: schema.DeepSpeedSchema, key: str) -> bool:
    """A top-level key DeepSpeed reads as an object: a strict section, or a block of plain keys."""
    return key in ds.sections or key in BLOCKS or any(read.startswith(key + ".") for read in ds.plain_reads)


# Top-level objects DeepSpeed 0.19.8 reads without a model or a dotted plain read (runtime/config.py)
BLOCKS = frozenset({"pipeline", "timers", "datastates_ckpt", "optimizer", "scheduler"})
# Scalars whose default is None, by what DeepSpeed does with them (runtime/config.py: batch sizes and counts
# are compared as integers; the data types and the log level are looked up as names)
_NAMES = frozenset({"communication_data_type", "log_level", "seq_parallel_communication_data_type"})


def accepted_as(ds: schema.DeepSpeedSchema, key: str, value: Any) -> bool:
    """Would DeepSpeed accept `value` under the top-level `key`? Checked as the real DeepSpeed reads it
    (`tests/adversarial/test_damage_hang_crash.py` holds this against DeepSpeed 0.19.8 itself); unsure is no."""
    if not _block(ds, key):
        return _plain_accepted(ds, key, value)
    if not isinstance(value, dict):
        return False
    if key in ds.sections:
        return not validate_section(ds.sections[key], value, ds)
    # a plain block: each key DeepSpeed reads in it must be of its type (`"enabled": "x"` fails); others are ignored
    return all(_plain_accepted(ds, f"{key}.{k}", v) for k, v in value.items() if f"{key}.{k}" in ds.plain_reads)


def _plain_accepted(ds: schema.DeepSpeedSchema, dotted: str, value: Any) -> bool:
    """A value of the type DeepSpeed reads for the plain key `dotted` (its default's type)."""
    if dotted in _NAMES:
        return isinstance(value, str)
    default = ds.plain_defaults.get(dotted)
    if isinstance(default, bool):
        return isinstance(value, bool)
    if isinstance(default, str) or type(value) not in (int, float) or not math.isfinite(value) or value <= 0:
        return False  # a name with choices (gradient_allreduce_op) is not guessed at; no count is zero or less
    return isinstance(default, float) or float(value).is_integer()  # an int default or None: a count


def takes(ds: schema.DeepSpeedSchema, key: str) -> str:
    """What `key` takes, for the message of a rename not offered."""
    if key in ds.sections:
        return "an object that DeepSpeed validates, not this value: not renamed"
    if _block(ds, key):
        return "an object, not this value: not renamed"
    return "another kind of value: not renamed"
