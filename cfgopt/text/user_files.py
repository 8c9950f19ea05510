"""Reading files cfgopt did not choose: bounded, regular files only, and, for a file a config names, only
inside the project.

Every reader of a file a user, a config or the machine names (linted files, dependency pins, project configs,
files a config names, a model's `config.json`, a `dataset_info.json`, installed packages' metadata, the node's
/sys and /proc files) goes through `read_bounded`: the file is opened without blocking (a FIFO would otherwise
block the open forever), checked to be a regular file (not a device such as `/dev/zero`, which reads forever),
and read up to a size cap (a file under /proc reports size 0 and may be endless). `read_head` reads the first
bytes of a large file (a compiled extension), `open_regular` opens one for a chunked scan.
`tests/repository/test_closed_classes.py` fails on any other open of such a file.

`ProjectScope` is the policy for a file a config *names* (`deepspeed: PATH`, `llamafactory-cli train
PATH`): a config under review (a pull request in CI) could name `~/.git-credentials` or `/etc/passwd`, and
a parse error's code frame would print that file's content into a CI log. Such a file is read only when it is

- named on the command line itself, or
- a regular file of at most `MAX_REFERENCE_BYTES` under a *project folder*: a folder named on the command
  line, the current folder, or the referencing config's project (`repository_of`: the nearest folder above it
  holding `.git`, else a `pyproject.toml`, `setup.py`, `requirements.txt` ..., else the config's own folder),
  and with no hidden folder or file name (`.git/config`, `.env`, `.ssh/`) below that folder. The home folder
  and the filesystem root are never project folders.

Otherwise the reference is reported as not read (`Project.not_read`), without any of the file's content.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from cfgopt.text.real_paths import real_path, realpath

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, BinaryIO

MAX_REFERENCE_BYTES = 4 * 1024 * 1024  # a DeepSpeed JSON or a training YAML is kilobytes
MAX_SMALL_FILE_BYTES = 4 * 1024 * 1024  # dependency pins and project configs, likewise


class UnsafeFileError(OSError):
    """A file cfgopt does not read: not a regular file, or larger than the cap. An OSError, so that a reader
    that already handles an unreadable file handles this one the same way."""


# Every file opened by `open_regular` while a `recording_reads()` is active: its absolute path -> (mtime, size) as
# read. `--watch` lints again when one of them changes: the DeepSpeed JSON, dataset and environment a config reads,
# not only the files named.
_read_log: dict[str, tuple[int, int]] | None = None


class recording_reads:  # lower-case as contextlib.suppress: a class written as a call, `with recording_reads():`
    """Record the files read inside the block (see `_read_log`): `with recording_reads() as read:`. A class, not a
    `contextlib.contextmanager`: the lint path does without contextlib (its import, 0.4 ms of start-up)."""

    def __enter__(self) -> dict[str, tuple[int, int]]:
        global _read_log
        self._outer, _read_log = _read_log, {}
        return _read_log

    def __exit__(self, *exc_info: object) -> None:
        global _read_log
        if self._outer is not None and _read_log is not None:
            self._outer.update(_read_log)
        _read_log = self._outer


def changed_since(read: dict[str, tuple[int, int]]) -> bool:
    """Has a file of a `recording_reads()` log changed (or gone) since it was read?"""
    for path, seen in read.items():
        try:
            st = os.stat(path)
        except OSError:
            return True
        if (st.st_mtime_ns, st.st_size) != seen:
            return True
    return False


def open_regular(path: Path | str) -> BinaryIO:
    """`path` opened for reading when it is a regular file; else UnsafeFileError (or the OSError of opening
    it): `with open_regular(path) as handle:`, the handle closed at the block's end. Opened without blocking: a
    FIFO would otherwise block the open forever. Symlinks are followed: what counts is the file read."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeFileError(f"{path}: not a regular file (FIFO, device, socket or folder); not read")
        if _read_log is not None:
            _read_log[os.path.abspath(path)] = (st.st_mtime_ns, st.st_size)
        return os.fdopen(fd, "rb", buffering=0)
    except BaseException:
        os.close(fd)
        raise


def read_head(path: Path | str, limit: int) -> bytes:
    """The first `limit` bytes of the regular file `path` (a compiled extension's ELF head, a sysfs value)."""
    with open_regular(path) as handle:
        return _read_up_to(handle, limit)


def _read_up_to(handle: BinaryIO, limit: int, expected: int = 0) -> bytes:
    """At most `limit` bytes; the first read asks for `expected` bytes (the file's size) at once, so that a
    regular file comes back as one buffer, not 1 MiB chunks joined (a copy: 0.1 s on a 167 MiB dataset)."""
    chunks: list[bytes] = []
    size = 0
    while size < limit:
        chunk = handle.read(min(max(1 << 20, expected - size), limit - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def read_bounded(path: Path | str, limit: int = MAX_SMALL_FILE_BYTES) -> bytes:
    """The bytes of `path` when it is a regular file of at most `limit` bytes; else UnsafeFileError (or the
    OSError of opening it)."""
    with open_regular(path) as handle:
        reported = os.fstat(handle.fileno()).st_size
        if reported > limit:
            raise UnsafeFileError(f"{path}: larger than {_mib(limit)}; not read")
        data = _read_up_to(handle, limit + 1, reported + 1)
    if len(data) > limit:  # it grew, or it is a pseudo-file reporting size 0
        raise UnsafeFileError(f"{path}: larger than {_mib(limit)}; not read")
    return data


def parse_json(data: str | bytes) -> Any:
    """`json.loads` of text cfgopt did not write (an environment snapshot, a dataset, a `dataset_info.json`, a
    model's `config.json`), bounded in depth: nesting past the interpreter's recursion limit is a ValueError
    with json's own words ("maximum recursion depth exceeded while decoding a JSON array"), as any other
    malformed JSON, never a RecursionError traceback."""
    try:
        return json.loads(data)
    except RecursionError as exc:
        raise ValueError(str(exc)) from None


def looked_at(path: Path, test: str = "exists") -> bool:
    """`path.exists()` / `.is_dir()` / `.is_file()` (`test`), False where the path cannot even be looked at
    (`lint DIR/a.yaml` in a folder of mode 000: Python 3.11 raises PermissionError there); reading it then
    fails with a one-line error."""
    try:
        return bool(getattr(path, test)())
    except OSError:
        return False


def read_stream(stream: BinaryIO, limit: int, name: str = "stdin") -> bytes:
    """At most `limit` bytes of a stream (stdin); UnsafeFileError past that: `< /dev/zero` or a 300 MB pipe is
    refused after `limit` bytes, never read until memory or the time limit runs out."""
    data = _read_up_to(stream, limit + 1)
    if len(data) > limit:
        raise UnsafeFileError(f"{name} is larger than {_mib(limit)}; not read (configs are kilobytes)")
    return data


def _mib(limit: int) -> str:
    return f"{limit // (1024 * 1024)} MiB" if limit >= 1024 * 1024 else f"{limit} bytes"


def read_text_bounded(path: Path | str, limit: int = MAX_SMALL_FILE_BYTES) -> str:
    """`read_bounded` as UTF-8 text, undecodable bytes replaced (for files only searched, never edited)."""
    return read_bounded(path, limit).decode("utf-8", errors="replace")


def _never_a_project_folder(folder: Path) -> bool:
    home = realpath(os.path.expanduser("~"))
    return str(folder) in (home, realpath(os.sep))


# What marks a project's root folder: a repository, else a Python project's manifest (LLaMA-Factory's own tree
# has both); the first folder above a config holding one of these, in this order of preference.
ROOT_MARKERS = (".git",)
PROJECT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", "requirements.txt", "cfgopt.toml")


def repository_of(config: Path) -> Path:
    """The folder a config's references may reach: the nearest folder above it holding `.git` (the repository
    root, where LLaMA-Factory's examples resolve their paths), else the nearest one holding a project manifest
    (`PROJECT_MARKERS`), else the config's own folder. Never the home folder or the filesystem root."""
    folder = real_path(config).parent
    for markers in (ROOT_MARKERS, PROJECT_MARKERS):
        for candidate in (folder, *folder.parents):
            if _never_a_project_folder(candidate):
                break
            if any((candidate / marker).exists() for marker in markers):
                return candidate
    return folder


def _hidden_below(path: Path, folder: Path) -> bool:
    return any(part.startswith(".") for part in path.relative_to(folder).parts)


class ProjectScope:
    """Which files a config may make cfgopt read (see the module docstring)."""

    def __init__(self, named: list[Path]) -> None:
        self.named_files = {real_path(p) for p in named if not os.path.isdir(p)}
        folders = [real_path(p) for p in named if os.path.isdir(p)]
        folders.append(real_path(Path.cwd()))
        self.folders = [f for f in dict.fromkeys(folders) if not _never_a_project_folder(f)]

    def refusal(self, path: Path, config: Path) -> str | None:
        """Why the file `path`, named by the config `config`, is not read (None: it may be read)."""
        real = real_path(path)
        if real in self.named_files:
            return None
        folders = [*self.folders, repository_of(config)]
        inside = [f for f in folders if real.is_relative_to(f)]
        if not inside:
            return "points outside the project (the folders named, the current folder, the config's repository)"
        if all(_hidden_below(real, f) for f in inside):
            return "points into a hidden file or folder"
        try:
            st = real.stat()
        except OSError as exc:
            return f"cannot be read ({exc.strerror or exc})"
        if not stat.S_ISREG(st.st_mode):
            return "is not a regular file"
        if st.st_size > MAX_REFERENCE_BYTES:
            return f"is larger than {MAX_REFERENCE_BYTES // (1024 * 1024)} MiB"
        return None
