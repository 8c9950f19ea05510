"""`report_to` as the HF Trainer judges it (LF003).

LLaMA-Factory passes the value on unchecked; TrainingArguments turns it into a list (`none` and `all` first, any
other string into a one-item list), and the Trainer, when it is built (after the dataset is tokenised and the model
loaded), refuses every item that is no integration it knows: transformers 5.6.0 trainer.py L550,
integrations/integration_utils.py L2658-2676. The names and words come from the judged release's snapshot
(`LlamaFactorySchema.report_to`, which scripts/sync_schemas.py takes from the installed transformers), never from
a list typed here.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from cfgopt.knowledge.schema import ReportTo
from cfgopt.text import suggest

# What a user writes to switch reporting off: the YAML and Python spellings of "nothing" (OmegaConf reads an
# unquoted false/no/off as False, null/~ as None, and `None` as the string 'None')
OFF_WORDS = frozenset({"none", "null", "false", "no", "off"})
OFF = "none"  # the word TrainingArguments reads as no reporting


class Refused(NamedTuple):
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
