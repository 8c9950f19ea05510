"""`report_to` as the HF Trainer judges it (LF003), and as LLaMA-Factory's PPO check does first (LF017).

LLaMA-Factory passes the value on unchecked; TrainingArguments turns it into a list (`none` and `all` first, any
other string into a one-item list), and the Trainer, when it is built (after the dataset is tokenised and the model
loaded), refuses every item that is no integration it knows: transformers 5.6.0 trainer.py L550,
integrations/integration_utils.py L2658-2676. The names and words come from the judged release's snapshot
(`LlamaFactorySchema.report_to`, which scripts/sync_schemas.py takes from the installed transformers), never from
a list typed here.
"""

from __future__ import annotations

from cfgopt.knowledge.schema import ReportTo
from cfgopt.loaders import edits
from cfgopt.rules.support.llamafactory import is_train_group, read_by_argparse, value_of
from cfgopt.text import suggest
from cfgopt.text.record import Record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from cfgopt.rules.base import Context, Rule
    from cfgopt.text.diagnostics import Fix
    from cfgopt.text.source import Entry

# What a user writes to switch reporting off: the YAML and Python spellings of "nothing" (OmegaConf reads an
# unquoted false/no/off as False, null/~ as None, and `None` as the string 'None')
OFF_WORDS = frozenset({"none", "null", "false", "no", "off"})
OFF = "none"  # the word TrainingArguments reads as no reporting


class Refused(Record):
    """A `report_to` value the Trainer refuses, with what the message and the fix need."""

    item: Any  # the first item the Trainer names in its error, as it holds it
    off: bool  # the value means "no reporting" (false, None, null, no, off)
    exact: str | None  # an accepted name or word it only differs from in case
    guess: str | None  # the accepted name or word it is closest to (a typo)


def refused(value: Any, allowed: ReportTo) -> Refused | None:
    """Why the Trainer refuses `report_to: value`, or None when it takes it."""
    if allowed.accepts(value):
        return None
    items = value if isinstance(value, list) else [value]
    item = next((i for i in items if not (isinstance(i, str) and i in allowed.integrations)), items[0])
    text = "" if item is None else str(item).strip()
    off = not isinstance(value, list) and (item is None or item is False or text.lower() in OFF_WORDS)
    known = [*allowed.integrations, *sorted(allowed.words)]
    exact = next((name for name in known if name.lower() == text.lower() and name != text), None)
    guess = None if off or exact else suggest.closest(text, known, cutoff=0.6)
    return Refused(item, off, exact, guess)


def trainer_error(item: Any, allowed: ReportTo) -> str:
    """The Trainer's own words for the item it refuses (integration_utils.py L2672-2674)."""
    return f"{item} is not supported, only {', '.join(allowed.integrations)} are supported."


def written_value(ctx: Context, entry: Entry) -> Any:
    """`report_to` as LLaMA-Factory receives it: the text argparse converts on a command line without a YAML, else
    the value OmegaConf reads."""
    return entry.node.raw if read_by_argparse(ctx.source, entry) else entry.node.value


def replacement(why: Refused) -> tuple[str, bool] | None:
    """The value to write instead of a refused one, and whether that is safe: `none` for a value meaning no
    reporting and a name in another case (the same meaning), the closest name for a typo (a guess); None: none."""
    if why.off or why.exact:
        return why.exact or OFF, True
    return (why.guess, False) if why.guess else None


def replacement_fix(rule: Rule, ctx: Context, entry: Entry, why: Refused, ppo: bool = False) -> Fix | None:
    """`replacement` as a fix (none for one item of a list: the message names it); `ppo`: only a value the PPO
    check takes (`ppo_refuses`)."""
    new = replacement(why) if not isinstance(entry.node.value, list) else None
    if new is None or (ppo and ppo_refuses(new[0])):
        return None
    value, safe = new
    described = f"Use `{value}` (no reporting)" if value == OFF else f"Use `{value}`"
    return rule.fix(described, edits.replace_value(ctx.source, entry, value), safe=safe)


# LLaMA-Factory's PPO check at start-up, on the list TrainingArguments made: every item one of these (0.9.5
# hparams/parser.py L344-347), before the dataset is read and long before the Trainer judges the names (LF003)
PPO_LOGGERS = ("wandb", "tensorboard", "trackio", "none")


def as_trainer_list(value: Any) -> list[Any] | None:
    """The list TrainingArguments makes of `report_to: value` (transformers 5.6.0 training_args.py L1560-1567):
    `none` alone -> [], any other non-list -> [value], a list as it is; None for `all` alone, which becomes the
    integrations installed where the job runs (not known here)."""
    if value == "all" or value == ["all"]:
        return None
    if value == "none" or value == ["none"]:
        return []
    return list(value) if isinstance(value, list) else [value]


def ppo_refuses(value: Any) -> bool | None:
    """Does LLaMA-Factory's PPO check stop `report_to: value` at start-up? None for `all` alone: it depends on the
    integrations installed where the job runs."""
    items = as_trainer_list(value)
    return None if items is None else any(item not in PPO_LOGGERS for item in items)


def ppo_checks(ctx: Context) -> bool:
    """Does LLaMA-Factory's PPO check judge this config's `report_to` (a PPO training run)? Then LF017 reports a
    value it refuses, and LF003 leaves it (the run stops there first)."""
    return value_of(ctx, "stage") == "ppo" and is_train_group(ctx)
