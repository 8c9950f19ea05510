"""What a requirement pin says about the node a job runs on: whether a flash-attn build is AMD's, and the dependency
ranges each LLaMA-Factory release checks at start-up or declares (the pins themselves, their builds and exact
versions are read by `cfgopt.text.requirements`). Read by the requirement rules (ENV001-ENV003) and by the speed
planner, which plans nothing the rules call a failure (a flash-attn build for the other platform, a job that stops
at start-up)."""

from __future__ import annotations

import functools
from pathlib import Path

from cfgopt.text.requirements.requirement import normalise
from cfgopt.text.requirements.versions import platform_of_build, spec_admits


def flash_attn_not_for_rocm(spec: str) -> bool:
    """Is a flash-attn requirement (its specifier, or `@ URL`) one that does not give a ROCm node AMD's build: a
    CUDA wheel, or the default index's source distribution (its build follows the torch present at build time and
    downloads a CUDA wheel for CUDA torch)? A ROCm wheel, or a wheel / checkout whose build cannot be told, is not."""
    build = platform_of_build(spec)
    return not (build == "rocm" or (spec.startswith("@") and build == ""))


# What each LLaMA-Factory release requires of its dependencies, read from its source at the release tag:
# `check_dependencies` in src/llamafactory/extras/misc.py (checked at start-up; `DISABLE_VERSION_CHECK=1` skips
# it), and what pip resolves but nothing checks at run time: the `deepspeed` / `torch` ranges of setup.py's extras
# (0.9.0-0.9.3), pyproject.toml (0.9.4) or requirements/deepspeed.txt (0.9.5), and pyproject.toml's dependencies
# where they are narrower than the check (0.9.4, 0.9.5: accelerate <=1.11.0, peft <=0.18.1, no transformers 4.57.0).
CHECKED: dict[str, dict[str, str]] = {
    "0.9.0": {
        "transformers": ">=4.41.2,<=4.45.0",
        "datasets": ">=2.16.0,<=2.21.0",
        "accelerate": ">=0.30.1,<=0.33.0",
        "peft": ">=0.11.1,<=0.12.0",
        "trl": ">=0.8.6,<=0.9.6",
    },
    "0.9.1": {
        "transformers": ">=4.41.2,<=4.46.1",
        "datasets": ">=2.16.0,<=3.1.0",
        "accelerate": ">=0.34.0,<=1.0.1",
        "peft": ">=0.11.1,<=0.12.0",
        "trl": ">=0.8.6,<=0.9.6",
    },
    "0.9.2": {
        "transformers": ">=4.41.2,<=4.49.0,!=4.46.0,!=4.46.1,!=4.46.2,!=4.46.3,!=4.47.0,!=4.47.1,!=4.48.0",
        "datasets": ">=2.16.0,<=3.2.0",
        "accelerate": ">=0.34.0,<=1.2.1",
        "peft": ">=0.11.1,<=0.12.0",
        "trl": ">=0.8.6,<=0.9.6",
    },
    "0.9.3": {
        "transformers": ">=4.45.0,<=4.52.4,!=4.46.0,!=4.46.1,!=4.46.2,!=4.46.3,!=4.47.0,!=4.47.1,!=4.48.0,!=4.52.0",
        "datasets": ">=2.16.0,<=3.6.0",
        "accelerate": ">=0.34.0,<=1.7.0",
        "peft": ">=0.14.0,<=0.15.2",
        "trl": ">=0.8.6,<=0.9.6",
    },
    "0.9.4": {
        "transformers": ">=4.51.0,<=4.57.1",
        "datasets": ">=2.16.0,<=4.0.0",
        "accelerate": ">=1.3.0,<=1.11.0",
        "peft": ">=0.14.0,<=0.17.1",
        "trl": ">=0.18.0,<=0.24.0",
    },
    "0.9.5": {
        "transformers": ">=4.55.0,<=5.6.0",
        "datasets": ">=2.16.0,<=4.0.0",
        "accelerate": ">=1.3.0,<=1.15.0",
        "peft": ">=0.18.0,<=0.20.0",
        "trl": ">=0.18.0,<=0.24.0",
    },
}
DECLARED: dict[str, dict[str, str]] = {
    "0.9.0": {"deepspeed": ">=0.10.0,<=0.14.4", "torch": ">=1.13.1"},
    "0.9.1": {"deepspeed": ">=0.10.0,<=0.14.4", "torch": ">=1.13.1"},
    "0.9.2": {"deepspeed": ">=0.10.0,<=0.16.4", "torch": ">=1.13.1"},
    "0.9.3": {"deepspeed": ">=0.10.0,<=0.16.9", "torch": ">=2.0.0"},
    # 0.9.4 / 0.9.5: pyproject.toml's dependencies are narrower than `check_dependencies` for some packages
    "0.9.4": {
        "deepspeed": ">=0.10.0,<=0.16.9",
        "torch": ">=2.4.0",
        "transformers": ">=4.51.0,<=4.57.1,!=4.52.0,!=4.57.0",
    },
    "0.9.5": {
        "deepspeed": ">=0.10.0,<=0.18.4",
        "torch": ">=2.4.0",
        "transformers": ">=4.55.0,<=5.6.0,!=4.52.0,!=4.57.0",
        "accelerate": ">=1.3.0,<=1.11.0",
        "peft": ">=0.18.0,<=0.18.1",
    },
}


def admitted(package: str, spec: str, version: str) -> bool:
    return spec_admits(spec, version)


# --------------------------------------------------------------------------- what releases require of each other
# scripts/sync_requirement_metadata.py writes it from PyPI's metadata; read here, never fetched at lint time.
METADATA_FILE = Path(__file__).resolve().parent / "schemas" / "requirement-metadata.json"


@functools.cache
def requirement_metadata() -> tuple[str, dict[str, dict[str, dict[str, str]]]]:
    """(the platform the snapshot assumes, package -> version -> {required package: specifier})."""
    import json

    data = json.loads(METADATA_FILE.read_text(encoding="utf-8"))
    return data["assumed"], data["packages"]


def requires(package: str, version: str) -> dict[str, str] | None:
    """What a release requires of other packages (normalised names), or None where the snapshot lacks it."""
    return requirement_metadata()[1].get(normalise(package), {}).get(version)
