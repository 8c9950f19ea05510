"""What the data rules share: the job's local data profile (cfgopt.job.data_profile), only for a training job whose
dataset is local; a config whose data is on a hub, or not found, gets no data finding (and no cost beyond a
few `stat` calls: nothing is read unless `dataset_info.json` is found in the project)."""

from __future__ import annotations

from cfgopt.rules.support.llamafactory import training
from cfgopt.text.diagnostics import Severity
from cfgopt.text.document import display_path
from cfgopt.text.user_text import is_int

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from cfgopt.job.data_location import LocalData
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


# Why a data finding that stops LLaMA-Factory is an error, or only a warning (LF048, LF057's pages say it too).
LAUNCH_FOLDER = (
    "`dataset_dir` is resolved against the folder the run is launched from, which cfgopt cannot know: it tries "
    "the current folder, then the config's folder and every folder above it up to the repository root. An error "
    "where no launch folder changes the outcome, the reasoning of LF005 (a `deepspeed:` path found in none of the "
    "folders it tries): only one of those folders holds a `dataset_info.json`, so a run reads that one or "
    "none (and without one LLaMA-Factory stops too: `Cannot open data/dataset_info.json`). A warning, naming the "
    "other file, where several do: which one the run reads depends on where it is launched."
)


def launch_severity(found: LocalData) -> tuple[Severity, str]:
    """(the severity of a finding that stops LLaMA-Factory when it reads `found.folder`'s dataset_info.json, the
    words to add to its message): an error unless another folder a run may be launched from holds one."""
    if not found.others:
        return Severity.ERROR, ""
    other = display_path(found.others[0] / "dataset_info.json")
    more = f" (and {len(found.others) - 1} more)" if len(found.others) > 1 else ""
    return Severity.WARNING, (
        f"; read from {display_path(found.folder / 'dataset_info.json')}, but a run launched elsewhere reads "
        f"{other}{more}"
    )


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
