"""Where a job's training data is, without reading it: the `dataset` names and the folder holding
`dataset_info.json` (resolved as cfgopt.job.data_profile describes). A lint whose data is not local (a hub
dataset, no `dataset_info.json` in the project) stops here: the profile, its readers and its tokenizer tables
(`data_profile`, `data_tokens`) are imported only for data that is local."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, NamedTuple

from cfgopt.text.user_files import repository_of

DATA_CONFIG = "dataset_info.json"


class NotLocal(NamedTuple):
    """Why the job's data is not profiled (a hub dataset, no dataset_info.json found, a format not read)."""

    reason: str


class LocalData(NamedTuple):
    """The dataset names of a job and the folder of the `dataset_info.json` that lists them."""

    names: list[str]
    folder: Path


def dataset_names(value: Any) -> list[str]:
    if isinstance(value, str):
        return [n.strip() for n in value.split(",") if n.strip()]
    if isinstance(value, list):
        return [str(n).strip() for n in value if str(n).strip()]
    return []


def project_roots(config: Path) -> list[Path]:
    home, root = os.path.realpath(os.path.expanduser("~")), os.path.realpath(os.sep)
    roots = [Path(os.path.realpath(repository_of(config))), Path(os.path.realpath(Path.cwd()))]
    return [r for r in dict.fromkeys(roots) if str(r) not in (home, root)]


def inside(path: Path, roots: list[Path]) -> bool:
    real = Path(os.path.realpath(path))
    for root in roots:
        if real.is_relative_to(root) and not any(p.startswith(".") for p in real.relative_to(root).parts):
            return True
    return False


def data_folder(dataset_dir: Any, config: Path) -> Path | None:
    """The folder holding `dataset_info.json`: the current folder's `dataset_dir`, else the config's folder's
    and those above it up to the repository root; None when none holds one (or `dataset_dir` is not local)."""
    if (
        not isinstance(dataset_dir, str)
        or not dataset_dir
        or dataset_dir == "ONLINE"
        or dataset_dir.startswith("REMOTE:")
    ):
        return None
    try:
        given = Path(os.path.expanduser(dataset_dir))
        roots = project_roots(config)
        if given.is_absolute():
            candidates = [given]
        else:
            top = repository_of(config)
            above = [config.parent, *[p for p in config.parent.resolve().parents if p.is_relative_to(top)]]
            candidates = [Path.cwd() / given, *(folder / given for folder in above)]
        for folder in candidates:
            if (folder / DATA_CONFIG).is_file() and inside(folder / DATA_CONFIG, roots):
                return folder
    except (OSError, ValueError):  # a path the system cannot look up (too long, NUL byte): not local data
        return None
    return None


def local_data(dataset: Any, dataset_dir: Any, config: Path) -> LocalData | NotLocal | None:
    """The dataset names and the folder of their `dataset_info.json`; NotLocal when none is found; None when
    the job names no dataset."""
    names = dataset_names(dataset)
    if not names:
        return None
    folder = data_folder(dataset_dir, config)
    if folder is None:
        return NotLocal(f"no {DATA_CONFIG} found under `dataset_dir: {dataset_dir}`")
    return LocalData(names, folder)


def is_profiled(found: object) -> bool:
    """Is a job's `data_profile` a measured profile (neither None nor NotLocal), without importing the profile?"""
    return found is not None and not isinstance(found, NotLocal)
