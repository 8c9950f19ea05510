"""The folder where `cfgopt verify` and `cfgopt tune` keep synthetic models and data between runs: what it
holds, how big it is, and clearing it (`--clear-cache`). A random-init model of a real shape takes gigabytes,
so every run that uses the folder says where it is and how much it holds.

The runs' own caches go there too (`child_env`): the `datasets` library's processed copies of the training data
(`HF_DATASETS_CACHE`, else 34-68 MB in ~/.cache/huggingface/datasets per run that `--clear-cache` could not
remove), so clearing the folder removes everything verify and tune wrote.

Clearing removes only what cfgopt writes there (`model-<hash>`, `data`, `data-<kind>`, `hf-datasets` and half-built
`.…building-…` folders), never the folder's other contents: `--cache-dir` may name a folder the user shares with
other tools.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

# `data` holds the SFT data, `data-<kind>` each other stage's (synthetic_meta.KINDS)
_OURS = ("model-*", "data", "data-*", ".model-*", ".data.building-*", ".data-*.building-*", "hf-datasets")
DATASETS_CACHE = "hf-datasets"  # HF_DATASETS_CACHE of the runs


def child_env(env: dict[str, str], cache_dir: Path | None) -> dict[str, str]:
    """The environment of a verify / tune child process: the caches it writes kept under `cache_dir` (the
    `datasets` library's, whatever the user's own HF_DATASETS_CACHE: that folder is not ours to fill)."""
    if cache_dir is not None:
        env["HF_DATASETS_CACHE"] = str(cache_dir / DATASETS_CACHE)
    return env


def _entries(cache_dir: Path) -> list[Path]:
    if not cache_dir.is_dir():
        return []
    return sorted({path for pattern in _OURS for path in cache_dir.glob(pattern)})


def size_bytes(path: Path) -> int:
    """Bytes of the files under `path` (symlinks not followed)."""
    if path.is_file():
        return path.stat().st_size
    total = 0
    for folder, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except OSError:
                continue  # removed meanwhile
    return total


def human(count: int) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if count < 1000 or unit == "GB":
            return f"{count:.0f} {unit}" if unit == "bytes" else f"{count:.1f} {unit}"
        count /= 1000  # type: ignore[assignment]
    raise AssertionError("unreachable")


def used_bytes(cache_dir: Path) -> int:
    return sum(size_bytes(entry) for entry in _entries(cache_dir))


def summary(cache_dir: Path, command: str = "verify") -> str:
    """One line: where the cache is, what it holds, and how to clear it."""
    return (
        f"synthetic models and data are cached in {cache_dir} ({human(used_bytes(cache_dir))}); "
        f"`cfgopt {command} --clear-cache` removes them"
    )


def clear(cache_dir: Path) -> tuple[int, int]:
    """Remove cfgopt's entries from the cache folder (and the folder, when that leaves it empty); returns the
    number of entries and the bytes removed."""
    entries = _entries(cache_dir)
    freed = 0
    for entry in entries:
        freed += size_bytes(entry)
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
    with contextlib.suppress(OSError):  # not empty (the user's other files are kept) or not there
        cache_dir.rmdir()
    return len(entries), freed


def clear_command(cache_dir: Path, command: str) -> str:
    count, freed = clear(cache_dir)
    if not count:
        return f"cfgopt {command}: nothing cached in {cache_dir}"
    return f"cfgopt {command}: removed {count} cached item(s), {human(freed)}, from {cache_dir}"


def free_bytes(cache_dir: Path) -> int | None:
    """Free space on the disk that holds (or will hold) the cache folder; None when it cannot be read."""
    folder = cache_dir
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return None
