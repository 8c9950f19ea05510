"""Where a job's training data is, without reading it: the `dataset` names, the folder holding
`dataset_info.json` (resolved as cfgopt.job.data_profile describes) and the other folders a run launched
elsewhere would read one from, and that file's entries. A lint whose data is not local (a hub dataset, no
`dataset_info.json` in the project) stops here: the profile, its readers and its tokenizer tables
(`data_profile`, `data_tokens`) are imported only for data that is local."""

from __future__ import annotations

import os
from pathlib import Path

from cfgopt.text.real_paths import real_path, realpath
from cfgopt.text.record import Record
from cfgopt.text.user_files import parse_json, read_bounded, repository_of

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

DATA_CONFIG = "dataset_info.json"


class NotLocal(Record):
    """Why the job's data is not profiled (a hub dataset, no dataset_info.json found, a format not read)."""

    reason: str


class LocalData(Record):
    """The dataset names of a job and the folder of the `dataset_info.json` that lists them; `others`: the other
    folders a run may read one from (launched elsewhere: `dataset_dir` is relative to the launch folder)."""

    names: list[str]
    folder: Path
    others: tuple[Path, ...] = ()


def dataset_names(value: Any) -> list[str]:
    if isinstance(value, str):
        return [n.strip() for n in value.split(",") if n.strip()]
    if isinstance(value, list):
        return [str(n).strip() for n in value if str(n).strip()]
    return []


def project_roots(config: Path) -> list[Path]:
    home, root = realpath(os.path.expanduser("~")), realpath(os.sep)
    roots = [real_path(repository_of(config)), real_path(Path.cwd())]
    return [r for r in dict.fromkeys(roots) if str(r) not in (home, root)]


def inside(path: Path, roots: list[Path]) -> bool:
    real = real_path(path)
    for root in roots:
        if real.is_relative_to(root) and not any(p.startswith(".") for p in real.relative_to(root).parts):
            return True
    return False


def data_folders(dataset_dir: Any, config: Path) -> list[Path]:
    """The folders holding a `dataset_info.json` that a run may read: `dataset_dir` under the current folder, the
    config's folder and those above it up to the repository root (each a folder the run may be launched from), in
    that order and once each; empty when none holds one (or `dataset_dir` is not local)."""
    if (
        not isinstance(dataset_dir, str)
        or not dataset_dir
        or dataset_dir == "ONLINE"
        or dataset_dir.startswith("REMOTE:")
    ):
        return []
    try:
        given = Path(os.path.expanduser(dataset_dir))
        roots = project_roots(config)
        if given.is_absolute():
            candidates = [given]
        else:
            top = repository_of(config)
            above = [config.parent, *[p for p in config.parent.resolve().parents if p.is_relative_to(top)]]
            candidates = [Path.cwd() / given, *(folder / given for folder in above)]
    except (OSError, ValueError):  # a path the system cannot look up (too long, NUL byte): not local data
        return []
    found: dict[str, Path] = {}
    for folder in candidates:
        try:
            if (folder / DATA_CONFIG).is_file() and inside(folder / DATA_CONFIG, roots):
                found.setdefault(realpath(folder), folder)
        except (OSError, ValueError):  # this folder cannot be looked up: a run launched there finds no file either
            continue
    return list(found.values())


def local_data(dataset: Any, dataset_dir: Any, config: Path) -> LocalData | NotLocal | None:
    """The dataset names and the folder of their `dataset_info.json`; NotLocal when none is found; None when
    the job names no dataset."""
    names = dataset_names(dataset)
    if not names:
        return None
    folders = data_folders(dataset_dir, config)
    if not folders:
        return NotLocal(f"no {DATA_CONFIG} found under `dataset_dir: {dataset_dir}`")
    return LocalData(names, folders[0], tuple(folders[1:]))


def dataset_info(folder: Path) -> dict[str, Any] | NotLocal:
    """The entries of `folder/dataset_info.json` (read bounded); NotLocal with the reason when it cannot be read
    as a JSON object."""
    try:
        info = parse_json(read_bounded(folder / DATA_CONFIG))
    except (OSError, ValueError, RecursionError) as exc:
        return NotLocal(f"{DATA_CONFIG} cannot be read ({exc})")
    if not isinstance(info, dict):
        return NotLocal(f"{DATA_CONFIG} is not a JSON object")
    return info


def is_profiled(found: object) -> bool:
    """Is a job's `data_profile` a measured profile (neither None nor NotLocal), without importing the profile?"""
    return found is not None and not isinstance(found, NotLocal)
