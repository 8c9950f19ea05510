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
    current = path.read_bytes()
    if expected is not None and current != expected:
        raise ChangedOnDisk(f"{path} changed on disk while cfgopt was fixing it; not overwritten")
    if current == data:
        return False
    if st.st_nlink > 1:
        _write_in_place(path, data, current)
        return True
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".cfgopt-tmp", dir=path.parent)
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
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".cfgopt-new", dir=path.parent)
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
