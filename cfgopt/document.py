"""A source file as text, with what a span edit must preserve: encoding, BOM, line endings, final newline.

Every position cfgopt reports or edits is a character offset into `Document.text`; (line, column) pairs
are derived from it here and nowhere else.
"""

from __future__ import annotations

import bisect
import os
from dataclasses import dataclass, field
from pathlib import Path

BOM = "\ufeff"


class DocumentError(Exception):
    """The file cannot be read as text (I/O error, not UTF-8, binary)."""


@dataclass
class Document:
    path: Path
    text: str  # decoded, BOM stripped; line endings kept as they are in the file
    has_bom: bool = False
    _line_starts: list[int] = field(default_factory=list, repr=False)

    @classmethod
    def from_bytes(cls, path: Path, raw: bytes) -> Document:
        if b"\x00" in raw[:8192]:
            raise DocumentError("binary file (contains NUL bytes)")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DocumentError(f"not UTF-8 text (byte {exc.start}: {raw[exc.start : exc.start + 1]!r})") from None
        has_bom = text.startswith(BOM)
        if has_bom:
            text = text[1:]
        return cls(path=path, text=text, has_bom=has_bom)

    @classmethod
    def read(cls, path: Path) -> Document:
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise DocumentError(exc.strerror or str(exc)) from None
        return cls.from_bytes(path, raw)

    def to_bytes(self, text: str | None = None) -> bytes:
        body = self.text if text is None else text
        return ((BOM if self.has_bom else "") + body).encode("utf-8")

    @property
    def newline(self) -> str:
        """The file's own line ending, so inserted lines match it."""
        i = self.text.find("\n")
        return "\r\n" if i > 0 and self.text[i - 1] == "\r" else "\n"

    @property
    def line_starts(self) -> list[int]:
        if not self._line_starts:
            starts = [0]
            find = self.text.find
            i = find("\n")
            while i != -1:
                starts.append(i + 1)
                i = find("\n", i + 1)
            self._line_starts = starts
        return self._line_starts

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
        return self.text[start:end].rstrip("\r\n")

    def line_start(self, offset: int) -> int:
        return self.line_starts[bisect.bisect_right(self.line_starts, offset) - 1]

    def line_end(self, offset: int) -> int:
        """Offset just past the line ending of the line holding `offset` (or end of text)."""
        i = self.text.find("\n", offset)
        return len(self.text) if i == -1 else i + 1


def real_path(path: Path) -> Path:
    """The canonical path used as a file's identity. Unlike Path.resolve(), never raises on a symlink
    loop (Python 3.11 raises RuntimeError there); the loop then fails, with a clear message, when read."""
    return Path(os.path.realpath(path))


def display_path(path: Path) -> str:
    """A path as reports show it: relative to the current directory when under it, else as given."""
    try:
        return str(real_path(path).relative_to(real_path(Path.cwd())))
    except ValueError:
        return str(path)
