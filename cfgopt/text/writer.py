"""The one writer of every file cfgopt writes (fixes, snapshots, caches, reports, plots).

Never through a link: a symbolic link at the name is refused (writing would change the file it points to, or
replace the user's link with a file), and so is a file with other hard links, unless the caller judged every
one of its names with the change (`atomic_write(..., names=N)`, the fixer's hard-linked DeepSpeed JSON read
under all its names): a write to one name is a write to all of them, and the other names may be another job's
config (an 8B job's ZeRO-2 written into a 70B job's JSON).

Normally atomic: a temp file with a fresh random name in the same folder, fsync, the original mode (owner and
extended attributes, so a POSIX ACL too, where permitted), then os.replace; a reader (or a crash) sees the old file
or the new one, never half of one, and the temp file is removed whatever fails (Ctrl-C too, and SIGTERM or SIGHUP
where the command turns them into an interrupt: `cfgopt.text.termination`). A hard-linked file whose names were all
judged is written in place instead, since os.replace would give the name a new inode and silently split it from its
other names: the new text is first written and fsynced to a temp file beside it (so that a complete copy exists
before the file is touched), then copied into the file itself, truncated and fsynced; should that fail, the old text
is put back (or, failing that too, the error names the temp file holding the new text)."""

from __future__ import annotations

import errno
import os
import stat
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


# The OS's reasons a write fails, in the user's words (`why_not_written`); the OS's own words follow in brackets.
_OS_REASONS = {
    errno.EROFS: "its file system is read-only",
    errno.ENOSPC: "no space left on its device",
    errno.EDQUOT: "its disk quota is used up",
}


def why_not_written(path: Path, exc: BaseException) -> str:
    """Why writing `path` failed, for a message that names the file itself as the user gave it: never a path. The
    OS's errors name the temp file by its absolute path (`[Errno 1] Operation not permitted: '/home/.../.x.yaml.
    q1w2e3r4.cfgopt-tmp'`), which means nothing to the user: they are said in words, with the OS's word in
    brackets. The writer's own refusals read "PATH reason" and are given as "it reason"."""
    if isinstance(exc, OSError) and exc.strerror:
        if exc.errno in (errno.EACCES, errno.EPERM):
            # the temp file beside it, or the folder, could not be made: the folder is what the user can change
            where = "it is" if exc.filename is not None and Path(exc.filename) == path else "its folder is"
            return f"{where} not writable ({exc.strerror})"
        reason = _OS_REASONS.get(exc.errno or 0)
        return f"{reason} ({exc.strerror})" if reason else exc.strerror
    text = str(exc)
    if text.startswith(f"{path}: "):
        return text.removeprefix(f"{path}: ")
    return "it " + text.removeprefix(f"{path} ") if text.startswith(f"{path} ") else text


class LinkAtOutput(OSError):
    """The output name is a link (symbolic, or a file with other hard links) or not a regular file: writing
    would change another file too."""


class ChangedOnDisk(Exception):
    """The file changed between reading and writing; it is left as it is."""


def hard_linked(path: Path | str) -> bool:
    """Is `path` a regular file with other names (hard links)? False when it cannot be looked at."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_nlink > 1


def _existing(path: Path, names: int) -> os.stat_result | None:
    """The file's own status (never a link's target); None when there is none. LinkAtOutput for a symbolic
    link, something not a regular file, or a file with more hard links than the `names` the caller judged."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        raise LinkAtOutput(
            f"{path} is a symbolic link; not overwritten nor written through (remove it, or name another)"
        )
    if not stat.S_ISREG(st.st_mode):
        raise LinkAtOutput(f"{path} is not a regular file; not overwritten")
    if st.st_nlink > names:
        others = st.st_nlink - 1
        raise LinkAtOutput(
            f"{path} has {others} other hard link(s) (other names of the same file); writing it would change "
            "them too, and not every config that reads them was judged with the change: not written "
            "(copy it to break the link, or name every config that reads it)"
        )
    return st


def write_new(path: Path, data: bytes) -> None:
    """Write `data` as the regular file `path`, created or atomically replaced; never through a link at `path`
    (`cfgopt estimate --plot out.png` where `out.png -> ~/.bashrc`): LinkAtOutput instead."""
    st = _existing(path, 1)
    _replace(path, data, stat.S_IMODE(st.st_mode) if st is not None else 0o666 & ~_umask(), None)


def write_report(path: Path, text: str) -> None:
    """A report the user names (`--json FILE`): `write_new`, or SystemExit (exit 2, one line) when it cannot."""
    from cfgopt.text.document import shown

    try:
        write_new(path, text.encode("utf-8"))
    except OSError as exc:
        raise SystemExit(shown(f"cfgopt: error: cannot write {path}: {exc.strerror or exc}")) from None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def read_only(path: Path | str) -> bool:
    """Is the file read-only: no write permission bit (which even root respects here), or not writable by
    this user?"""
    mode = os.stat(path).st_mode
    return not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) or not os.access(path, os.W_OK)


def atomic_write(path: Path, data: bytes, expected: bytes | None = None, names: int = 1) -> bool:
    """Write `data` over the existing file `path`; False when it already holds that (the file is not touched).
    `expected`: what it must hold now (else ChangedOnDisk); `names`: how many of its hard links the caller
    judged with the change (more links than that: LinkAtOutput)."""
    st = _existing(path, names)
    if st is None:
        raise FileNotFoundError(f"{path} does not exist; not written")
    if read_only(path):
        # os.replace would happily swap a read-only file out from under its owner: respect the mode instead
        raise PermissionError(f"{path} is read-only; not changed")
    current = read_bounded(path, MAX_WRITTEN_BYTES)
    if current == data:  # already written (through another of its judged names): nothing to do
        return False
    if expected is not None and current != expected:
        raise ChangedOnDisk(f"{path} changed on disk while cfgopt was fixing it; not overwritten")
    if st.st_nlink > 1:
        _write_in_place(path, data, current)
        return True
    _replace(path, data, stat.S_IMODE(st.st_mode), (st.st_uid, st.st_gid))
    return True


def _replace(path: Path, data: bytes, mode: int, owner: tuple[int, int] | None) -> None:
    """Atomically put `data` at `path`: a fresh temp file beside it, fsynced, `mode` (and `owner`), renamed over
    it; the temp file removed on any failure."""
    import tempfile  # here: it imports shutil, which the lint path (reading `hard_linked`) need not load

    fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(path), suffix=".cfgopt-tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        if owner is not None:
            _give_owner(tmp, owner)
        _copy_xattrs(path, tmp)  # after chown, which may clear some of them
        os.replace(tmp, path)
    except BaseException:
        _remove(tmp)
        raise


def _give_owner(tmp: str, owner: tuple[int, int]) -> None:
    """The replaced file's owner and group onto its replacement, where permitted (and where the platform has
    `os.chown`)."""
    try:
        os.chown(tmp, *owner)
    except (PermissionError, AttributeError):
        return


def _remove(tmp: str) -> None:
    """Remove a temp file of a failed write (gone already: nothing to do)."""
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        return


def _copy_xattrs(source: Path, target: str) -> None:
    """The extended attributes of the file being replaced onto its replacement: a user's notes (`user.*`), a POSIX
    ACL (`system.posix_acl_access`, which lets a colleague write the config), an SELinux label. Best effort: where
    the platform has no xattr calls, the file system none, or one may not be set (`trusted.*` needs privileges),
    the write goes on without it."""
    if not hasattr(os, "listxattr"):  # Linux only in the standard library
        return
    try:
        names = os.listxattr(source, follow_symlinks=False)
    except OSError:  # gone (a new file), or a file system without extended attributes
        return
    for name in names:
        try:
            os.setxattr(target, name, os.getxattr(source, name, follow_symlinks=False), follow_symlinks=False)
        except OSError:
            continue


def _write_in_place(path: Path, data: bytes, current: bytes) -> None:
    """Write a hard-linked file through its own inode (see the module docstring)."""
    import tempfile

    fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(path), suffix=".cfgopt-new", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        _remove(tmp)
        raise
    try:
        _overwrite(path, data)
    except OSError as exc:
        try:
            _overwrite(path, current)
        except OSError:
            why = exc.strerror or exc
            raise OSError(
                f"{path}: writing it in place failed ({why}); the fixed text is beside it in {Path(tmp).name}"
            ) from exc
        os.unlink(tmp)
        raise
    os.unlink(tmp)


def _overwrite(path: Path, data: bytes) -> None:
    with open(path, "r+b") as handle:
        handle.write(data)
        handle.truncate()
        handle.flush()
        os.fsync(handle.fileno())
