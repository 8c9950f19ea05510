"""Atomic writes: a temp file in the same folder, fsync, the original mode, then os.replace. A reader
(or a crash) sees the old file or the new one, never half of one."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path


class ChangedOnDisk(Exception):
    """The file changed between reading and writing; it is left as it is."""


def atomic_write(path: Path, data: bytes, expected: bytes | None = None) -> bool:
    """Write `data` to `path`; False when the content is already that (the file is not touched)."""
    st = path.stat()
    if not st.st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) or not os.access(path, os.W_OK):
        # os.replace would happily swap a read-only file out from under its owner: respect the mode instead
        raise PermissionError(f"{path} is read-only; not changed")
    current = path.read_bytes()
    if expected is not None and current != expected:
        raise ChangedOnDisk(f"{path} changed on disk while cfgopt was fixing it; not overwritten")
    if current == data:
        return False
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
