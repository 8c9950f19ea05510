"""Which files to read and what they are. The kind is recognised by content, not by name, because
pre-commit hands over every YAML and JSON file of a repository: anything that is not a LLaMA-Factory
config, a DeepSpeed config or a script calling `llamafactory-cli` is skipped silently."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from cfgopt.text.patterns import lazy
from cfgopt.text.requirements.files import is_requirement_file
from cfgopt.text.source import Kind
from cfgopt.text.user_files import looked_at

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

CONFIG_SUFFIXES = {".yaml", ".yml", ".json"}
SCRIPT_SUFFIXES = {".sh", ".bash"}
SKIP_DIRS = {"node_modules", "__pycache__", "site-packages"}

# DeepSpeed keys that no other common JSON file uses at the top level.
DS_MARKERS = {
    "zero_optimization",
    "train_batch_size",
    "train_micro_batch_size_per_gpu",
    "zero_allow_untested_optimizer",
    "zero_force_ds_cpu_optimizer",
    "steps_per_print",
    "wall_clock_breakdown",
    "gradient_accumulation_steps",
}
_DS_TEXT_MARKER = lazy(r'"(zero_optimi[sz]ation|train_batch_size|train_micro_batch_size_per_gpu)"')
_LF_TEXT_MARKER = lazy(r"(?m)^\s*(model_name_or_path|finetuning_type|stage)\s*:")
_V1_KEYS = {
    "peft_config",
    "dist_config",
    "kernel_config",
    "model_class",
    "train_dataset",
    "micro_batch_size",
    "quant_config",
    "batching_strategy",
}
_ACCELERATE_KEYS = {"compute_environment", "distributed_type"}


def iter_files(paths: list[Path], unreadable: list[tuple[Path, str]] | None = None) -> Iterator[tuple[Path, bool]]:
    """(file, named_explicitly). Folders are walked recursively without following symlinks, so a
    symlink loop cannot hang the walk; hidden folders (.git, .venv) are skipped. A folder that cannot be listed
    (no permission) is added to `unreadable` with why (as ruff warns of it), never skipped silently."""

    for path in paths:
        if looked_at(path, "is_dir"):
            for folder, names in walk_folders(path, unreadable):
                base = Path(folder)  # once per folder: a Path built from the folder's text per file cost a third
                for name in names:
                    yield base / name, False
        else:
            yield path, True


def walk_folders(folder: Path, unreadable: list[tuple[Path, str]] | None = None) -> Iterator[tuple[str, list[str]]]:
    """Each folder under `folder` (itself first, then each subfolder's tree in name order) as `iter_files` walks it,
    with the names of the files there that it yields, in order; as text, for a walk that builds a Path only for the
    files it keeps (`json_readers` looks for a name in every config of a repository).

    `os.walk(folder, followlinks=False)`'s walk, top-down, with its answers (a link to a folder is listed among the
    folders and not entered, a folder that cannot be listed is skipped and noted), from one list of pending folders
    rather than a generator per level, and each entry's link test from its listing (`DirEntry.is_symlink`) rather
    than an lstat per folder: a repository's walk took a third less."""
    pending = [os.fspath(folder)]
    while pending:
        top = pending.pop()
        listed = _listing(top, unreadable)
        if listed is None:
            continue
        dirs, files, links = listed
        dirs = sorted(d for d in dirs if not d.startswith(".") and d not in SKIP_DIRS)
        yield top, [name for name in sorted(files) if _walked(name)]
        pending += [os.path.join(top, d) for d in reversed(dirs) if d not in links]


def _listing(top: str, unreadable: list[tuple[Path, str]] | None) -> tuple[list[str], list[str], set[str]] | None:
    """A folder's subfolders, its other entries, and which of the subfolders are links, as `os.walk` sorts them;
    None (noted in `unreadable`) where it cannot be listed."""
    dirs: list[str] = []
    files: list[str] = []
    links: set[str] = set()
    try:
        with os.scandir(top) as entries:
            for entry in entries:
                if not _is_dir(entry):
                    files.append(entry.name)
                    continue
                dirs.append(entry.name)
                if _is_link(entry):
                    links.add(entry.name)
    except OSError as exc:
        if unreadable is not None:
            unreadable.append((Path(exc.filename or "."), exc.strerror or str(exc)))
        return None
    return dirs, files, links


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def _is_link(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_symlink()
    except OSError:
        return False  # as os.walk's `os.path.islink`: then entered, and noted if it cannot be listed


def _walked(name: str) -> bool:
    suffix = os.path.splitext(name)[1].lower()
    return suffix in CONFIG_SUFFIXES or suffix in SCRIPT_SUFFIXES or is_requirement_file(name)


def loader_for(path: Path) -> str:
    if is_requirement_file(path.name):
        # requirements*.txt, pyproject.toml, the lock files, setup.py, setup.cfg, a conda environment.yml
        # (cfgopt.text.requirements)
        return "requirements"
    suffix = path.suffix.lower()
    if suffix == ".json":
        return "json"
    if suffix in SCRIPT_SUFFIXES:
        return "script"
    return "yaml"


def classify_yaml(data: Any, lf_fields: set[str]) -> Kind:
    if not isinstance(data, dict) or not data:
        return Kind.UNKNOWN
    keys = {str(k) for k in data}
    if "model" in keys and "model_name_or_path" not in keys and keys & _V1_KEYS:
        return Kind.LF_V1
    if keys & _ACCELERATE_KEYS and ({"num_processes", "mixed_precision", "machine_rank"} & keys):
        return Kind.ACCELERATE
    known = len(keys & lf_fields)
    if "model_name_or_path" in keys or (known >= 3 and known * 2 >= len(keys)):
        return Kind.LF_TRAIN
    return Kind.UNKNOWN


def classify_json(data: Any) -> Kind:
    if not isinstance(data, dict):
        return Kind.UNKNOWN
    keys = set(data)
    if keys & DS_MARKERS or any(k.startswith("zero_optimi") for k in keys):
        return Kind.DEEPSPEED
    return Kind.UNKNOWN


def looks_like_ours(text: str, loader: str) -> bool:
    """For a file that does not parse: does it look like one of our kinds, so its error is ours to report?"""
    if loader == "json":
        return bool(_DS_TEXT_MARKER.search(text))
    return bool(_LF_TEXT_MARKER.search(text))
