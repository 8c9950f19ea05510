"""The machine the runs use, as `verify` and `tune` both see it: the target (`--target`, else this machine's GPU),
the settings the fixes are planned with (its GPUs and the optional packages it has), and the synthetic assets
prepared for the runs, saying what is built where."""

from __future__ import annotations

from pathlib import Path

from cfgopt.job.settings import Settings
from cfgopt.verify import runner

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def run_target(given: str | None) -> tuple[str | None, str]:
    """The target the runs are planned for and where it came from: `--target` (None for `none`), else this
    machine's GPU (`runner.detect_target`)."""
    from cfgopt.knowledge.targets import NONE

    if given is not None:
        return (None if given == NONE else given), "--target"
    return runner.detect_target(), "detected"


def run_settings(target: str | None, gpus: int, say, source: str = "") -> tuple[Settings, Any]:
    """What `verify` and `tune` judge and plan for: the target and GPUs the runs use, and the optional packages
    the machine has (probed in a child Python: a fix needing a missing package is left out, with a message), and
    the probed platform."""
    from cfgopt.environment.probe import environment_of, importable_packages, probe_platform

    platform = probe_platform()
    for name, present in importable_packages(platform).items():
        if not present:
            say(f"{name} is not importable here: fixes that need it are left out")
    settings = Settings(
        target_name=target,
        gpus=gpus,
        environment=environment_of(platform),
        extend_select=["PF", "MEM"],
        target_source=source,
        gpus_source="--gpus",
    )
    return settings, platform


def prepare_assets_saying(assets: runner.Assets, cache_dir: Path, work: Path, timeout: float, say, relay) -> dict:
    """Build what the runs need (verify and tune alike), saying what is overridden, what is built where, and
    what the cache then holds."""
    from cfgopt.verify import cache

    for note in assets.override_notes:
        say(note)
    for note in assets.notes:
        say(f"offline mode: {note}")
    uses_cache = assets.model_config is not None or assets.dataset is not None
    if needed := runner.bytes_to_build(assets):
        say(f"building synthetic stand-ins (about {cache.human(needed)}) in {cache_dir} ...")
    built = runner.prepare_assets(assets, work, timeout, relay)
    if built.get("model_build_s"):
        size = built["parameters"] / 1e9
        say(f"built a {size:.2f}B-parameter random-init model in {built['model_build_s']:.0f} s")
    if uses_cache:
        say(cache.summary(cache_dir))
    return built
