"""A source file as text, with what a span edit must preserve: encoding, BOM, line endings, final newline.

Every position cfgopt reports or edits is a character offset into `Document.text`; (line, column) pairs
are derived from it here and nowhere else. Lines end where the file's own consumer ends them (`LINE_BREAKS`, by
`Document.syntax`), so a line number cfgopt reports is the parser's:

- YAML: where PyYAML (and so OmegaConf) ends them: `\r\n`, `\n`, a lone `\r`, U+0085, U+2028 or U+2029;
- JSON: `\r\n`, `\n` and a lone `\r` only (JSON's whitespace; U+2028 or U+0085 in a string are characters of
  the string for `json.load`);
- a shell script: `\n` only (bash reads a `\r` as part of a word).

The fixer refuses a file with a line break other than `\n` and `\r\n` where its consumer breaks lines
(`unusual_line_break`): few editors show them as line breaks, and an edit that adds a line could not match them.
A file that is not UTF-8 is refused with the reason; UTF-16 and UTF-32 (by their BOM, or the NUL bytes of
ASCII text in them) are named as such, since LLaMA-Factory, OmegaConf and the HF Trainer all read UTF-8. A
requirements*.txt is decoded as pip decodes it (`cfgopt.text.requirements.pip_encoding`: a byte order mark, a coding
comment, else UTF-8); one that is not UTF-8 byte for byte says how in `Document.encoding`, and no fix edits it.
"""

from __future__ import annotations

import bisect
import re
from itertools import accumulate
from pathlib import Path

from cfgopt.text import real_paths
from cfgopt.text.patterns import lazy

BOM = "\ufeff"
# Line breaks by syntax. YAML 1.1 as PyYAML reads it (reader.py `forward`): CRLF counts once.
LINE_BREAKS = {
    "yaml": lazy("\r\n|[\r\n\x85\u2028\u2029]"),
    "json": lazy("\r\n|[\r\n]"),
    "script": lazy("\n"),
    # the Language Server Protocol's lines (the editor's): `\r\n`, `\n`, `\r` only, U+2028 and U+0085 are
    # characters there; cfgopt/server maps its positions with this entry, the CLI with the file's own syntax
    "lsp": lazy("\r\n|[\r\n]"),
}


# The breaks of each syntax other than `\n`: a text with none of them is split at `\n` without the pattern
_OTHER_BREAKS = {"yaml": "\r\x85\u2028\u2029", "json": "\r", "script": "", "lsp": "\r"}


def line_starts(text: str, syntax: str) -> list[int]:
    """The offsets where lines start in `text` as `syntax` breaks them (a key of LINE_BREAKS): the one position
    mapping of the CLI (`Document.line_starts`) and of the language server (`server.analysis.LineIndex`)."""
    if not any(ch in text for ch in _OTHER_BREAKS[syntax]):  # `\n` only (most files)
        return list(accumulate((len(line) + 1 for line in text.split("\n")[:-1]), initial=0))
    return [0, *(m.end() for m in LINE_BREAKS[syntax].finditer(text))]


# The breaks an editor may not show as one, by syntax (none for a script: bash breaks at `\n` only).
_UNUSUAL_BREAKS = {
    "yaml": lazy("\r(?!\n)|[\x85\u2028\u2029]"),
    "json": lazy("\r(?!\n)"),
    "script": lazy("(?!)"),
}
BREAK_CHARS = "\r\n\x85\u2028\u2029"
# The syntax of a file by its suffix, as `discovery.loader_for` picks its loader
# (tests/adversarial/test_hostile_values.py holds the two to the same answer); a loader that reads another syntax
# sets `Document.syntax` itself.
_SYNTAX_BY_SUFFIX = {".json": "json", ".sh": "script", ".bash": "script"}


def encode(text: str) -> bytes:
    """A document's text as the bytes to write: UTF-8, with the bytes of a script that were not UTF-8 (read as
    lone surrogates by `Document.from_bytes`) written back as they were."""
    return text.encode("utf-8", "surrogateescape")


class DocumentError(Exception):
    """The file cannot be read as text (I/O error, not UTF-8, binary). `sniffed`: for bytes that could be read but
    are not UTF-8, their text as well as it decodes (`sniffed_text`), only to recognise what kind of file it is,
    so an unrelated file that a walk or pre-commit hands over passes silently; never linted or edited."""

    def __init__(self, message: str, sniffed: str | None = None) -> None:
        super().__init__(message)
        self.sniffed = sniffed


class Document:
    def __init__(self, path: Path, text: str, has_bom: bool = False, encoding: str | None = None) -> None:
        self.path = path
        self.text = text  # decoded, BOM stripped; line endings kept as they are in the file
        self.has_bom = has_bom  # a UTF-8 byte order mark, written back
        # None: the file is the text's UTF-8 (after its BOM). Else how pip decodes it, in words ("UTF-16
        # (little-endian) by its byte order mark", "latin-1 by its coding comment"): offsets are into the decoded
        # text, and the fixer does not edit it (`encode` writes UTF-8).
        self.encoding = encoding
        self._line_starts: list[int] = []
        self._syntax = _SYNTAX_BY_SUFFIX.get(Path(path).suffix.lower(), "yaml")

    @property
    def syntax(self) -> str:
        """ "yaml", "json" or "script": whose line breaks count (`LINE_BREAKS`)."""
        return self._syntax

    @syntax.setter
    def syntax(self, value: str) -> None:
        if value != self._syntax:
            self._syntax = value
            self._line_starts = []  # counted again with the new syntax's breaks

    def __repr__(self) -> str:
        return f"Document({self.path!r}, {len(self.text)} characters)"

    @classmethod
    def from_bytes(cls, path: Path, raw: bytes, as_pip_reads: bool | None = None) -> Document:
        """The document of a file's bytes; a requirements*.txt (by its name, or `as_pip_reads`) decoded as pip
        decodes it."""
        from cfgopt.text.requirements.files import is_requirements_txt

        if as_pip_reads if as_pip_reads is not None else is_requirements_txt(Path(path).name):
            return cls._from_requirements_bytes(path, raw)
        wide = wide_encoding(raw)
        if wide is not None:
            # Both open the file with encoding="utf-8": the byte order mark is no UTF-8, and without one the NUL
            # bytes are UTF-8 that PyYAML ("unacceptable character #x0000") and json.load refuse.
            fails = "with UnicodeDecodeError" if "with a byte order mark" in wide else "on its NUL bytes"
            raise DocumentError(
                f"{wide}: LLaMA-Factory (OmegaConf.load) and the HF Trainer (accelerate's json.load) read configs as "
                f"UTF-8 and stop {fails}; re-save it as UTF-8",
                sniffed_text(raw),
            )
        if b"\x00" in raw[:8192]:
            raise DocumentError("binary file (contains NUL bytes)", sniffed_text(raw))
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            if _SYNTAX_BY_SUFFIX.get(Path(path).suffix.lower()) != "script":
                where = f"byte {exc.start}: {raw[exc.start : exc.start + 1]!r}"
                raise DocumentError(f"not UTF-8 text ({where})", sniffed_text(raw)) from None
            # bash runs bytes: a GBK or Latin-1 comment is no error. Each byte that is not UTF-8 stands for itself
            # (a lone surrogate), so the tokenizer reads what bash reads and `encode` gives the bytes back.
            text = raw.decode("utf-8", "surrogateescape")
        has_bom = text.startswith(BOM)
        if has_bom:
            text = text[1:]
        return cls(path=path, text=text, has_bom=has_bom)

    @classmethod
    def _from_requirements_bytes(cls, path: Path, raw: bytes) -> Document:
        """A requirements file as pip reads it (`pip_encoding.decode_requirements`). Without a UTF-16 / UTF-32
        mark, the checks of any file come first, as before: the NUL bytes of UTF-16 text (pip reads them as UTF-8
        and fails on the requirement they give), a binary file."""
        from cfgopt.text.requirements.pip_encoding import (
            BOMS,
            UTF8_BOM,
            RequirementsDecodeError,
            decode_requirements,
            is_utf8,
        )

        wide_mark = raw.startswith(tuple(mark for mark, _, _ in BOMS if mark != UTF8_BOM))
        wide = None if wide_mark else wide_encoding(raw)
        if wide is not None:
            raise DocumentError(
                f"{wide}: pip reads a requirements file without a byte order mark or a coding comment as UTF-8 and "
                f"fails on the NUL characters; re-save it as UTF-8"
            )
        if not wide_mark and b"\x00" in raw[:8192]:
            raise DocumentError("binary file (contains NUL bytes)")
        try:
            decoded = decode_requirements(raw)
        except RequirementsDecodeError as exc:
            raise DocumentError(str(exc)) from None
        if "\x00" in decoded.text[:8192]:
            if raw.startswith(b"\xff\xfe\x00\x00"):  # UTF-32's little-endian mark starts with UTF-16's
                raise DocumentError(
                    f"{wide_encoding(raw)}: pip reads a file starting with FF FE as UTF-16 and fails on the NUL "
                    f"characters that gives; re-save it as UTF-8"
                )
            raise DocumentError("binary file (contains NUL bytes)")
        encoding = None if is_utf8(decoded, raw) else decoded.encoding
        return cls(path=path, text=decoded.text, has_bom=decoded.bom == UTF8_BOM, encoding=encoding)

    @classmethod
    def read(cls, path: Path) -> Document:
        from cfgopt.text.user_files import read_bounded  # one bounded reader for every user file

        try:
            raw = read_bounded(path)
        except OSError as exc:
            raise DocumentError(exc.strerror or str(exc)) from None
        return cls.from_bytes(path, raw)

    def to_bytes(self, text: str | None = None) -> bytes:
        body = self.text if text is None else text
        return encode((BOM if self.has_bom else "") + body)

    @property
    def newline(self) -> str:
        """The file's own line ending, so inserted lines match it."""
        i = self.text.find("\n")
        return "\r\n" if i > 0 and self.text[i - 1] == "\r" else "\n"

    @property
    def line_starts(self) -> list[int]:
        if not self._line_starts:
            self._line_starts = line_starts(self.text, self._syntax)
        return self._line_starts

    def unusual_line_break(self) -> str | None:
        """A description of the first line break other than `\n` and `\r\n` (where this syntax breaks lines), or
        None."""
        m = _UNUSUAL_BREAKS[self._syntax].search(self.text)
        if m is None:
            return None
        name = {"\r": "a lone CR (\\r)", "\x85": "U+0085 (NEL)", "\u2028": "U+2028", "\u2029": "U+2029"}[m.group()]
        return f"{name} at line {self.position(m.start())[0]}"

    def position(self, offset: int) -> tuple[int, int]:
        """1-based (line, column) of a character offset."""
        line = bisect.bisect_right(self.line_starts, offset) - 1
        return line + 1, offset - self.line_starts[line] + 1

    def offset(self, line: int, column: int) -> int:
        """Character offset of a 0-based (line, column)."""
        starts = self.line_starts
        if line >= len(starts):
            return len(self.text)
        return min(starts[line] + column, len(self.text))

    def line_text(self, line: int) -> str:
        """The 1-based line without its line ending."""
        starts = self.line_starts
        start = starts[line - 1]
        end = starts[line] if line < len(starts) else len(self.text)
        return self.text[start:end].rstrip(BREAK_CHARS)

    def line_start(self, offset: int) -> int:
        return self.line_starts[bisect.bisect_right(self.line_starts, offset) - 1]

    def line_end(self, offset: int) -> int:
        """Offset just past the line ending of the line holding `offset` (or end of text)."""
        starts = self.line_starts
        line = bisect.bisect_right(starts, offset)
        return starts[line] if line < len(starts) else len(self.text)


# Byte order marks of the wide Unicode encodings, UTF-32 first (its little-endian mark starts with UTF-16's).
_WIDE_BOMS = (
    (b"\xff\xfe\x00\x00", "UTF-32 (little-endian)"),
    (b"\x00\x00\xfe\xff", "UTF-32 (big-endian)"),
    (b"\xff\xfe", "UTF-16 (little-endian)"),
    (b"\xfe\xff", "UTF-16 (big-endian)"),
)


def sniffed_text(raw: bytes) -> str:
    """Bytes that are not UTF-8 as text good enough to tell what kind of file they are (the keys of a config
    are ASCII): UTF-16 / UTF-32 decoded by the encoding `wide_encoding` finds, anything else as Latin-1, which
    decodes every byte. Never the text a tool reads: only `DocumentError.sniffed` holds it."""
    wide = wide_encoding(raw)
    if wide is None:
        return raw.decode("latin-1")
    codec = ("utf-32" if wide.startswith("UTF-32") else "utf-16") + ("-le" if "little-endian" in wide else "-be")
    text = raw.decode(codec, "replace")
    return text.removeprefix(BOM)


def wide_encoding(raw: bytes) -> str | None:
    """ "UTF-16 encoded (...)" when `raw` starts with a UTF-16 / UTF-32 byte order mark, or, without one, has the
    NUL bytes ASCII text has in those encodings (every second, or three of every four bytes, at the same place);
    None otherwise (a binary file has NULs anywhere)."""
    for mark, name in _WIDE_BOMS:
        if raw.startswith(mark):
            return name.replace(" (", " encoded (").replace(")", ", with a byte order mark)")
    head = raw[:512]
    if len(head) < 8:
        return None

    def nul_share(place: int, width: int) -> float:
        column = head[place::width]
        return column.count(0) / max(1, len(column))

    for width, name in ((4, "UTF-32"), (2, "UTF-16")):
        for low, order in ((0, "little-endian"), (width - 1, "big-endian")):
            # ASCII and most Latin text: the low byte never NUL, the other bytes (nearly) always
            others = [nul_share(place, width) for place in range(width) if place != low]
            if nul_share(low, width) < 0.1 and min(others) > 0.9:
                return f"{name} encoded ({order}, no byte order mark: NUL bytes between ASCII characters)"
    return None
    for width, name in ((4, "UTF-32"), (2, "UTF-16")):
        for nonzero, order in ((0, "little-endian"), (width - 1, "big-endian")):
            places = [head[i::width] for i in range(width)]
            if (
                all(p.count(0) == len(p) for i, p in enumerate(places) if i != nonzero)
                and places[nonzero].count(0) == 0
            ):
                return f"{name} encoded ({order}, no byte order mark: NUL bytes between ASCII characters)"
    return None


# What a terminal or log viewer would act on rather than show, or could not encode: C0 and C1 controls and DEL
# (an escape sequence recolours or rewrites the screen, a newline forges a report line), lone surrogates (a JSON
# `"\ud800"` key: no UTF-8 for it), the Unicode line and paragraph separators, the bidirectional marks, overrides
# and isolates (they reorder what is shown, "Trojan Source"), and U+FFFE / U+FFFF (not allowed in XML either).
_UNSHOWABLE = lazy("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff\ufffe\uffff]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def shown(text: str) -> str:
    """User-derived text (a key, a value, a file name, a message quoting them) as a human report prints it: each
    character of `_UNSHOWABLE` written as `\\xNN` / `\\uNNNN`, so the text stays on its line, changes no colour
    and always encodes. The machine formats escape with their own syntax instead (JSON, XML)."""
    if text.isascii() and text.isprintable():  # the common case, without compiling the pattern: ASCII's
        return text  # unprintable characters (C0 controls, DEL) are exactly its share of `_UNSHOWABLE`
    return _UNSHOWABLE.sub(_escaped, text) if _UNSHOWABLE.search(text) else text


def real_path(path: Path) -> Path:
    """The canonical path used as a file's identity. Unlike Path.resolve(), never raises on a symlink
    loop (Python 3.11 raises RuntimeError there); the loop then fails, with a clear message, when read. Asked of
    the file system once per run (`real_paths.one_run`)."""
    return real_paths.real_path(path)


def display_path(path: Path) -> str:
    """A path as reports show it: relative to the current directory when under it, else as given."""
    try:
        return str(real_path(path).relative_to(real_path(Path.cwd())))
    except ValueError:
        return str(path)
