"""`cfgopt fix --write` replaces a config atomically (cfgopt/text/writer.py) and leaves nothing else behind: no
temp file when SIGTERM or SIGHUP stops it mid-write (as Ctrl-C never did), the file's extended attributes (and so
its POSIX ACL) kept, and a write that fails said in the user's words, with the user's path."""

from __future__ import annotations

import errno
import os
import shutil
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from rule_cases import HANG_BOUND_S, ROOT, run_cli

SEED = ROOT / "fixtures" / "seed"

# A child `cfgopt fix --write` whose first fsync of a temp file sends the signal to its own process: the signal
# arrives while the temp file exists, every time, whatever the machine's speed.
SIGNAL_AT_FSYNC = textwrap.dedent(
    """
    import os, signal, sys
    from cfgopt.cli import main

    real_fsync, sent = os.fsync, []

    def fsync(fd):
        if not sent and os.readlink(f"/proc/self/fd/{fd}").endswith(".cfgopt-tmp"):
            sent.append(fd)
            os.kill(os.getpid(), getattr(signal, sys.argv[1]))
        return real_fsync(fd)

    os.fsync = fsync
    sys.exit(main(["fix", "--write", *sys.argv[2:]]))
    """
)


def seed_copy(folder: Path) -> Path:
    folder.mkdir()
    for name in ("ds_z3_config.json", "llama3_lora_sft.yaml"):
        shutil.copy(SEED / name, folder / name)
    return folder


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to tell the temp file's descriptor")
@pytest.mark.parametrize(("name", "code"), [("SIGTERM", 143), ("SIGHUP", 129)])
def test_a_termination_mid_write_leaves_no_temp_file(tmp_path: Path, name: str, code: int) -> None:
    """A CI timeout or a cancelled pre-commit run (SIGTERM), a closed terminal (SIGHUP): Python's default is to
    die at once, and `.ds_z3_config.json.XXXX.cfgopt-tmp` stayed beside the config for the next `git add .`."""
    work = seed_copy(tmp_path / "seed")
    run = subprocess.run(
        [sys.executable, "-c", SIGNAL_AT_FSYNC, name, "."],
        cwd=work,
        env={**os.environ, "PYTHONPATH": str(ROOT), "DISABLE_VERSION_CHECK": "1"},
        capture_output=True,
        text=True,
        timeout=HANG_BOUND_S,
    )
    assert run.returncode == code, run.stderr
    assert f"cfgopt: terminated ({name})" in run.stderr and "Traceback" not in run.stderr
    assert sorted(p.name for p in work.iterdir()) == ["ds_z3_config.json", "llama3_lora_sft.yaml"]
    # the file being written when the signal came is the old one, whole
    assert (work / "ds_z3_config.json").read_bytes() == (SEED / "ds_z3_config.json").read_bytes()


# ---------------------------------------------------------------- extended attributes (cfgopt/text/writer.py)

# A POSIX ACL as the kernel stores it (acl_ea.h): version 2, then (tag, permissions, id) per entry; here user
# 1234 may read and write, as `setfacl -m u:1234:rw` gives.
UNDEFINED_ID = 0xFFFFFFFF
ACL_ENTRIES = [(0x01, 6, UNDEFINED_ID), (0x02, 6, 1234), (0x04, 4, UNDEFINED_ID), (0x10, 6, UNDEFINED_ID)]
ACL_ENTRIES += [(0x20, 4, UNDEFINED_ID)]  # user, the named user, group, mask, other
POSIX_ACL = struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *entry) for entry in ACL_ENTRIES)


def set_or_skip(path: Path, name: str, value: bytes) -> None:
    if not hasattr(os, "setxattr"):
        pytest.skip("no extended attribute calls on this platform")
    try:
        os.setxattr(path, name, value)
    except OSError as exc:  # a file system without them (tmpfs without user xattrs), or not permitted here
        pytest.skip(f"{name} cannot be set here: {exc.strerror}")


@pytest.mark.parametrize(
    ("name", "value"), [("user.note", b"keep me"), ("system.posix_acl_access", POSIX_ACL)], ids=["user", "acl"]
)
def test_fix_write_keeps_the_extended_attributes(tmp_path: Path, name: str, value: bytes) -> None:
    """The atomic replace puts a new inode at the name: mode and owner were copied, a user's note and the ACL that
    lets a colleague write the config were lost."""
    work = seed_copy(tmp_path / "seed")
    config = work / "llama3_lora_sft.yaml"
    set_or_skip(config, name, value)
    inode = config.stat().st_ino
    assert run_cli(["fix", "--write", str(work)])[0] in (0, 1)
    assert config.stat().st_ino != inode  # replaced, not written in place
    assert os.getxattr(config, name) == value


# ---------------------------------------------------------------- a write that fails, said (writer.why_not_written)


def _folder_not_writable(monkeypatch: pytest.MonkeyPatch) -> None:
    """What an immutable folder (or one of mode 555, for a user other than root) gives: the temp file cannot be
    made, and the OS names it by its absolute path."""
    import tempfile

    def mkstemp(prefix: str, suffix: str, dir: Path) -> tuple[int, str]:
        raise PermissionError(errno.EPERM, "Operation not permitted", str(Path(dir).resolve() / f"{prefix}x{suffix}"))

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)


def _changed_on_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("cfgopt.text.writer.read_bounded", lambda path, limit: b"edited meanwhile\n")


@pytest.mark.parametrize(
    ("fail", "said"),
    [
        (_folder_not_writable, "its folder is not writable (Operation not permitted)"),
        (_changed_on_disk, "it changed on disk while cfgopt was fixing it; not overwritten"),
    ],
)
def test_a_failed_write_is_said_in_words_with_the_users_path(tmp_path: Path, monkeypatch, fail, said: str) -> None:
    """It was `not written: [Errno 1] Operation not permitted: '/home/.../.ds_z3_config.json.hqyew54q.cfgopt-tmp'`:
    the OS's words, and a temp file's absolute path on this machine that the user never named."""
    seed_copy(tmp_path / "seed")
    monkeypatch.chdir(tmp_path)
    fail(monkeypatch)
    code, _, err = run_cli(["fix", "--write", "seed"])
    assert code == 2
    assert f"seed/ds_z3_config.json: error: not written: {said}\n" in err
    assert str(tmp_path) not in err and "Errno" not in err and "cfgopt-tmp" not in err
    assert sorted(p.name for p in (tmp_path / "seed").iterdir()) == ["ds_z3_config.json", "llama3_lora_sft.yaml"]


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root writes into a folder of mode 555")
def test_a_real_folder_that_is_not_writable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = seed_copy(tmp_path / "seed")
    monkeypatch.chdir(tmp_path)
    folder.chmod(0o555)
    try:
        code, _, err = run_cli(["fix", "--write", "seed"])
    finally:
        folder.chmod(0o755)
    assert code == 2 and "seed/ds_z3_config.json: error: not written: its folder is not writable (" in err
    assert str(tmp_path) not in err
