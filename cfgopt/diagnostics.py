"""What a rule reports: a diagnostic with a span, and an optional fix made of text edits."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from enum import Enum, IntEnum
from pathlib import Path
from typing import Any

from cfgopt.document import Document, real_path


class Severity(IntEnum):
    """error: the real tool fails; warning: silently wrong or slow; info: worth knowing."""

    INFO = 0
    WARNING = 1
    ERROR = 2

    def __str__(self) -> str:
        return self.name.lower()

    @classmethod
    def parse(cls, text: str) -> Severity:
        return cls[text.upper()]


class Applicability(str, Enum):
    SAFE = "safe"  # keeps what the user meant; applied by `cfgopt fix`
    UNSAFE = "unsafe"  # changes behaviour or guesses intent; needs --unsafe-fixes

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, order=True)
class Edit:
    """Replace text[start:end] with `text`. Offsets are characters in `Document.text`."""

    start: int
    end: int
    text: str


@dataclass
class Fix:
    description: str
    applicability: Applicability
    edits: list[Edit]


@dataclass
class Diagnostic:
    document: Document
    start: int
    end: int
    code: str
    name: str
    severity: Severity
    message: str
    key: str = ""
    fix: Fix | None = None

    @property
    def path(self) -> Path:
        return self.document.path

    @property
    def line_column(self) -> tuple[int, int]:
        return self.document.position(self.start)

    @property
    def end_line_column(self) -> tuple[int, int]:
        return self.document.position(max(self.start, self.end))

    def sort_key(self) -> tuple[str, int, str]:
        return (str(self.path), self.start, self.code)

    def to_json(self, relative_to: Path | None = None) -> dict[str, Any]:
        line, column = self.line_column
        end_line, end_column = self.end_line_column
        path = self.path
        if relative_to is not None:
            with contextlib.suppress(ValueError):  # outside relative_to: keep the path as given
                path = real_path(path).relative_to(real_path(relative_to))
        return {
            "file": str(path),
            "line": line,
            "column": column,
            "end_line": end_line,
            "end_column": end_column,
            "code": self.code,
            "name": self.name,
            "severity": str(self.severity),
            "message": self.message,
            "key": self.key,
            "fix": None
            if self.fix is None
            else {"applicability": str(self.fix.applicability), "description": self.fix.description},
        }
