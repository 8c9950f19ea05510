"""Safe writes. Normally atomic: a temp file in the same folder, fsync, the original mode, then os.replace; a
reader (or a crash) sees the old file or the new one, never half of one.

A file with more than one hard link is written in place instead, since os.replace would give the name a new
inode and silently split it from its other names: the new text is first written and fsynced to a temp file
beside it (so that a complete copy exists before the file is touched), then copied into the file itself,
truncated and fsynced; should that fail, the old text is put back (or, failing that too, the error names the
temp file holding the new text)."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

from cfgopt.text.user_files import read_bounded

MAX_WRITTEN_BYTES = 64 * 1024 * 1024  # more than any file cfgopt fixes (the engine reads at most 10 MiB)
# A file name is at most 255 bytes (NAME_MAX); the temp name adds a dot, 8 random characters and a suffix, so
# it carries at most this much of the name (a 250-byte name could otherwise not be written at all).
TEMP_NAME_BYTES = 96


def _temp_prefix(path: Path) -> str:
    """`.NAME.` for the temp file beside `path`, NAME cut to TEMP_NAME_BYTES bytes (whole characters)."""
    name = os.fsencode(path.name)[:TEMP_NAME_BYTES]
    return "." + name.decode("utf-8", errors="ignore") + "."


class LinkAtOutput(OSError):
    """The output name is a symbolic link (or not a regular file): writing would change the file it points to."""


def write_new(path: Path, data: bytes) -> None:
    """Write `data` as the regular file `path`, created or atomically replaced, never through a symbolic link at
    `path` (`cfgopt schema export` in a folder where `x.schema.json -> ~/.bashrc`): LinkAtOutput instead."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        what = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a regular file"
        raise LinkAtOutput(f"{path} is {what}; not overwritten (remove it, or choose another --out)")
    fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(path), suffix=".cfgopt-tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, stat.S_IMODE(st.st_mode) if st is not None else 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


class ChangedOnDisk(Exception):
    """The file changed between reading and writing; it is left as it is."""


def read_only(path: Path | str) -> bool:
    """Is the file read-only: no write permission bit (which even root respects here), or not writable by
    this user?"""
    mode = os.stat(path).st_mode
    return not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) or not os.access(path, os.W_OK)


def atomic_write(path: Path, data: bytes, expected: bytes | None = None) -> bool:
    """Write `data` to `path`; False when the content is already that (the file is not touched)."""
    st = path.stat()
    if read_only(path):
        # os.replace would happily swap a read-only file out from under its owner: respect the mode instead
        raise PermissionError(f"{path} is read-only; not changed")
    current = read_bounded(path, MAX_WRITTEN_BYTES)
    if expected is not None and current != expected:
        raise ChangedOnDisk(f"{path} changed on disk while cfgopt was fixing it; not overwritten")
    if current == data:
        return False
    if st.st_nlink > 1:
        _write_in_place(path, data, current)
        return True
    fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(path), suffix=".cfgopt-tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, stat.S_IMODE(st.st_mode))
        with contextlib.suppress(PermissionError, AttributeError):
            os.chown(tmp, st.st_uid, st.st_gid)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return True


def _write_in_place(path: Path, data: bytes, current: bytes) -> None:
    """Write a hard-linked file through its own inode (see the module docstring)."""
    fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(path), suffix=".cfgopt-new", dir=path.parent)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    try:
        _overwrite(path, data)
    except OSError as exc:
        try:
            _overwrite(path, current)
        except OSError:
            raise OSError(f"{path}: writing it in place failed ({exc}); the fixed text is in {tmp}") from exc
        os.unlink(tmp)
        raise
    os.unlink(tmp)


def _overwrite(path: Path, data: bytes) -> None:
    with open(path, "r+b") as handle:
        handle.write(data)
        handle.truncate()
        handle.flush()
        os.fsync(handle.fileno())
