"""What the data rules share: the job's local data profile (cfgopt.job.data_profile), only for a training job whose
dataset is local; a config whose data is on a hub, or not found, gets no data finding (and no cost beyond a
few `stat` calls: nothing is read unless `dataset_info.json` is found in the project)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cfgopt.rules.support.llamafactory import training
from cfgopt.text.user_text import is_int

if TYPE_CHECKING:
    from cfgopt.job.data_profile import DataProfile
    from cfgopt.rules.base import Context

TRIGGERS = frozenset({"dataset"})  # no `dataset`: no data to measure


def profile_of(ctx: Context) -> DataProfile | None:
    """The job's data profile when it is local and read (problems included), else None."""
    if not training(ctx):
        return None
    from cfgopt.job.data_location import is_profiled  # the profile's module only where the data is local

    found = ctx.job.data_profile
    return found if is_profiled(found) else None


def measured(ctx: Context) -> tuple[DataProfile, int, Any] | None:
    """(profile, cutoff_len, job) where the profile has samples and cutoff_len is a positive integer."""
    profile = profile_of(ctx)
    cutoff = ctx.job.value("cutoff_len")
    if profile is None or not profile.samples or not is_int(cutoff) or cutoff < 1:
        return None
    return profile, cutoff, ctx.job


def counted(profile: DataProfile) -> str:
    """How the tokens were counted, the template allowance included, for the end of a message."""
    return profile.counting
