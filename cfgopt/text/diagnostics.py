"""What a rule reports: a diagnostic with a span, and an optional fix made of text edits."""

from __future__ import annotations

from enum import Enum, IntEnum
from pathlib import Path

from cfgopt.text.document import Document, display_path, real_path
from cfgopt.text.record import Record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


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
    # shown, never applied (ruff's display-only fixes): it changes what the job trains on, which only the user
    # decides (LF023's `max_samples`)
    DISPLAY = "display-only"

    def __str__(self) -> str:
        return self.value


class Edit(Record):
    """Replace text[start:end] with `text`. Offsets are characters in `Document.text`."""

    start: int
    end: int
    text: str


class OtherPart(Record):
    """The part of a fix that another file's finding carries (a speed plan's ZeRO stage, written in its DeepSpeed
    JSON): the fixer says the fix was applied in part where that part is not written."""

    path: Path  # the other file
    key: str  # the key its finding stands on (dotted)
    words: str  # the part, as the fix's description names it: "ZeRO-2 (in ds_z3.json)"


class Fix(Record):
    description: str
    applicability: Applicability
    edits: list[Edit]
    # A speed plan (cfgopt/plan/planner.py): made from the file as it is, so the fixer applies it only once the
    # file's other fixes are in (it is planned again on the fixed text, and never fights a rule's fix).
    planned: bool = False
    other_part: OtherPart | None = None  # what of the description another file's fix writes


class Diagnostic:
    """One finding: the rule, the span [start, end) in `document`, the message, and the fix if there is one."""

    __slots__ = ("code", "detail", "document", "end", "fix", "key", "message", "name", "severity", "start")

    def __init__(
        self,
        document: Document,
        start: int,
        end: int,
        code: str,
        name: str,
        severity: Severity,
        message: str,
        key: str = "",
        fix: Fix | None = None,
        detail: str = "",
    ) -> None:
        self.document, self.start, self.end = document, start, end
        self.code, self.name, self.severity, self.message = code, name, severity, message
        self.key, self.fix = key, fix
        self.detail = detail  # the whole message where `message` had to be cut (a quoted value megabytes long)

    def _fields(self) -> tuple[Any, ...]:
        return (self.document, self.start, self.end, self.code, self.name, self.severity, self.message, self.key)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Diagnostic):
            return NotImplemented
        return self._fields() == other._fields() and self.fix == other.fix

    __hash__ = None  # type: ignore[assignment]  # mutable (the fix policy takes fixes off), as a dataclass

    def __repr__(self) -> str:
        return f"Diagnostic({self.path}:{self.start}-{self.end} {self.code} {self.severity}: {self.message!r})"

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
        path = display_path(self.path)  # as every format shows it: relative to the working directory under it
        if relative_to is not None:
            path = _relative_or(self.path, relative_to, path)
        out = {
            "file": path,
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
        if self.detail:
            out["detail"] = self.detail
        return out


def _relative_or(path: Path, base: Path, given: str) -> str:
    """`path` relative to `base`; `given` where it lies outside it."""
    try:
        return str(real_path(path).relative_to(real_path(base)))
    except ValueError:
        return given
