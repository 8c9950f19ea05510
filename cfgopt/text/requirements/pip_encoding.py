"""A requirements file's bytes as pip 23.2.1 decodes them (src/pip/_internal/utils/encoding.py `auto_decode`, called
by req/req_file.py `get_file_content` for every file `-r` / `-c` names, a conda `- pip:` list's includes too).

pip's steps, and this module's: a byte order mark picks UTF-8, UTF-16 or UTF-32 (`BOMS`, the first that starts the
file); else a PEP 263 coding comment (`coding[:=]\\s*([-\\w.]+)`) in the first two lines, on a line starting with `#`,
names the codec; else the locale's preferred encoding. The node's locale is not known here, and the same files must
read the same on any machine: UTF-8 is taken (what a GPU node's `C.UTF-8` / `en_US.UTF-8` locale gives; pip on such a
node fails on the file that fails here). A file that fails is read as no text: pip stops with UnicodeDecodeError, or
LookupError for a codec Python does not know (or that is no text encoding: `rot13`), before reading any line.

pip's table uses `codecs.BOM_UTF16` / `BOM_UTF32`, the native byte order's marks; read here as on a little-endian
node (x86-64, ARM: every GPU node), so that a big-endian machine gives the same answer: FF FE is UTF-16 (before
UTF-32's FF FE 00 00, which is never reached: a UTF-32 little-endian file reads as UTF-16), and the codec pip then
calls, "utf-16" or "utf-32" without a mark of its own, reads little-endian.
"""

from __future__ import annotations

import codecs
import re
import warnings
from pathlib import Path

from cfgopt.text.patterns import lazy
from cfgopt.text.record import Record

UTF8_BOM = b"\xef\xbb\xbf"
# pip's BOMS in its order, as they match on a little-endian node: (mark, codec of the rest, name in messages)
BOMS = (
    (UTF8_BOM, "utf-8", "UTF-8"),
    (b"\xff\xfe", "utf-16", "UTF-16 (little-endian)"),
    (b"\xfe\xff", "utf-16-be", "UTF-16 (big-endian)"),
    (b"\x00\x00\xfe\xff", "utf-32-be", "UTF-32 (big-endian)"),
)
# pip's ENCODING_RE, a bytes pattern: read on the line's bytes as Latin-1 characters (one per byte), where ASCII's
# `\s` and `\w` are the bytes pattern's
_CODING = lazy(r"coding[:=]\s*([-\w.]+)", re.ASCII)
# The codecs Python names "utf-16" / "utf-32" read a mark at the start, else the native order (little-endian here).
_NATIVE_ORDER = {
    "utf-16": ((b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be")),
    "utf-32": ((b"\xff\xfe\x00\x00", "utf-32-le"), (b"\x00\x00\xfe\xff", "utf-32-be")),
}
# Windows' code pages and their aliases (as Python normalises a name): LookupError on a Linux node, said so on any
_WINDOWS_ONLY = frozenset({"mbcs", "ansi", "dbcs", "oem"})


class RequirementsDecodeError(ValueError):
    """The bytes are no text as pip decodes a requirements file; the message is one line, saying what was tried."""


class DecodedRequirements(Record):
    text: str  # the byte order mark taken off
    bom: bytes  # the byte order mark pip took off (b"": none)
    encoding: str  # in words: "UTF-8", "UTF-16 (little-endian) by its byte order mark", "latin-1 by its coding comment"


def _decode(data: bytes, codec: str, at: int, failed: str) -> str:
    """`data.decode(codec)`, `data` starting at byte `at` of the file; RequirementsDecodeError naming the first byte
    that fails (`failed`: what the text is not, in words)."""
    marks = _NATIVE_ORDER.get(codec, ())
    for mark, ordered in marks:
        if data.startswith(mark):
            data, at, codec = data[len(mark) :], at + len(mark), ordered
            break
    else:
        codec = marks[0][1] if marks else codec
    try:
        with warnings.catch_warnings():  # unicode_escape's "invalid escape sequence": pip's noise, not cfgopt's
            warnings.simplefilter("ignore")
            return data.decode(codec)
    except UnicodeDecodeError as exc:
        where = f"byte {at + exc.start}: {data[exc.start : exc.start + 1]!r}"
    except LookupError:
        raise
    except Exception as exc:  # noqa: BLE001 (whatever else a codec raises, punycode's UnicodeError: pip stops too)
        where = f"{type(exc).__name__}: {exc}"
    raise RequirementsDecodeError(f"{failed} ({where})")


def _coding_comment(data: bytes) -> tuple[int, str] | None:
    """The line (1 or 2) and the codec a PEP 263 comment names, as pip finds it: the first of the first two lines
    (split at `\\n`) that starts with `#` and holds `coding:` or `coding=` followed by a name."""
    for number, line in enumerate(data.split(b"\n", 2)[:2], start=1):
        if line[:1] == b"#" and (found := _CODING.search(line.decode("latin-1"))) is not None:
            return number, found.group(1)
    return None


def _by_coding_comment(data: bytes, number: int, name: str) -> str:
    if name.lower().replace("-", "_") in _WINDOWS_ONLY:
        raise RequirementsDecodeError(
            f"its coding comment (line {number}) names {name!r}, a Windows code page: pip on a Linux node stops "
            f"with LookupError"
        )
    try:
        codec = codecs.lookup(name).name
    except LookupError as exc:
        raise RequirementsDecodeError(
            f"its coding comment (line {number}) names {name!r}, no encoding pip can decode with (LookupError: {exc})"
        ) from None
    failed = f"not {name} text as its coding comment says"
    try:
        return _decode(data, codec if codec in _NATIVE_ORDER else name, 0, failed)
    except LookupError as exc:  # a codec that is no text encoding (rot13, base64): bytes.decode refuses it
        raise RequirementsDecodeError(
            f"its coding comment (line {number}) names {name!r}, no text encoding (LookupError: {exc})"
        ) from None


def decode_requirements(data: bytes) -> DecodedRequirements:
    """The text pip reads from a requirements file's bytes (see the module docstring); RequirementsDecodeError when
    pip on a UTF-8 node fails on them."""
    for mark, codec, name in BOMS:
        if data.startswith(mark):
            failed = f"not {name} text after its byte order mark"
            text = _decode(data[len(mark) :], codec, len(mark), failed)
            return DecodedRequirements(text, mark, name if mark == UTF8_BOM else f"{name} by its byte order mark")
    comment = _coding_comment(data)
    if comment is not None:
        return DecodedRequirements(_by_coding_comment(data, *comment), b"", f"{comment[1]} by its coding comment")
    return DecodedRequirements(_decode(data, "utf-8", 0, "not UTF-8 text and no coding comment"), b"", "UTF-8")


def is_utf8(decoded: DecodedRequirements, data: bytes) -> bool:
    """Are the bytes the text's UTF-8 (after a UTF-8 byte order mark, if any)? Such a file is written back as UTF-8
    byte for byte; any other is not edited (`Document.encoding`)."""
    if decoded.bom not in (b"", UTF8_BOM):
        return False
    try:
        return decoded.text.encode("utf-8") == data[len(decoded.bom) :]
    except UnicodeEncodeError:  # a lone surrogate (`unicode_escape` decodes `\\ud800`)
        return False


def read_requirements(path: Path | str) -> str:
    """A requirements file's text as pip reads it: OSError when it cannot be read (`read_bounded`: not a regular
    file, too large), RequirementsDecodeError when pip fails to decode it."""
    from cfgopt.text.user_files import read_bounded

    return decode_requirements(read_bounded(path)).text
