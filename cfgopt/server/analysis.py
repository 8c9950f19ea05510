"""What the language server knows, without the protocol: the open documents (unsaved text included), their
findings from the same engine as `cfgopt lint`, their fixes as text edits, hover texts and completions.

Positions are LSP's: 0-based lines broken at `\\n`, `\\r\\n` and `\\r` only (the protocol's line breaks: U+2028,
U+2029 and U+0085 are characters of a line there, though PyYAML breaks lines at them), and UTF-16 code units (the
protocol's default encoding). The engine counts characters, so every position crosses `LineIndex`.

Open documents are linted in groups (`_Group`): a document with the open documents its job reads or that read it
(a YAML and the DeepSpeed JSON it names, a script and its YAML), whatever their folders, with every open
document's text standing in for its file (`overlay`) and the project config as the command line resolves it (a
fresh resolver per run, with `--force-exclude`: a file the config excludes gets nothing). A change re-lints its
own group only; the findings of the others stand, and a group's fixes are computed once per change. A document
over `LARGE` is linted when opened and when saved, never at each keystroke.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from functools import lru_cache
from pathlib import Path

from cfgopt.text.diagnostics import Applicability, Diagnostic
from cfgopt.text.document import line_starts, real_path
from cfgopt.text.record import Record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from cfgopt.job.settings import Settings
    from cfgopt.lint.engine import LintResult
    from cfgopt.lint.project_config import Resolver
    from cfgopt.text.document import Document

Position = tuple[int, int]  # (line, UTF-16 character), both 0-based
# A document longer than this (characters) is linted when opened and saved, not at each change: a lint of a
# 5 MB YAML takes over a second, and the server answers one request at a time.
LARGE = 1 << 20


class Span(Record):
    start: Position
    end: Position


class TextEdit(Record):
    span: Span
    text: str


class Completion(Record):
    label: str
    detail: str
    documentation: str
    kind: str  # "key" or "value"


class Problem(Record):
    """A file that could not be read as a config, or a project config that cannot be used: at its first line."""

    message: str


def _utf16(text: str) -> int:
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


class LineIndex:
    """Where the protocol's lines start in a text, and the conversions between character offsets and LSP
    positions."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = line_starts(text, "lsp")

    def position(self, offset: int) -> Position:
        offset = max(0, min(offset, len(self.text)))
        line = bisect_right(self.starts, offset) - 1
        return line, _utf16(self.text[self.starts[line] : offset])

    def line_bounds(self, line: int) -> tuple[int, int]:
        """Character offsets of the start of `line` and of the end of its text (before its line break)."""
        if line >= len(self.starts):
            return len(self.text), len(self.text)
        start = self.starts[line]
        end = self.starts[line + 1] if line + 1 < len(self.starts) else len(self.text)
        while end > start and self.text[end - 1] in "\r\n":
            end -= 1
        return start, end

    def offset(self, position: Position) -> int:
        """The character offset of an LSP position (clamped to its line's text and to the text)."""
        line, units = position
        offset, end = self.line_bounds(line)
        counted = 0
        while offset < end and counted < units:
            counted += 2 if ord(self.text[offset]) > 0xFFFF else 1
            offset += 1
        return offset

    def end(self) -> Position:
        return self.position(len(self.text))


@lru_cache(maxsize=32)
def line_index(text: str) -> LineIndex:
    """One index per text (a document's text at one version), shared by every position asked of it."""
    return LineIndex(text)


def _to_lsp(doc: Document, offset: int) -> Position:
    line, units = line_index(doc.text).position(offset)
    # the engine's text has the byte order mark taken off; the editor's buffer, which the overlay gave it, has it
    return line, units + (1 if doc.has_bom and line == 0 else 0)


def span_of(d: Diagnostic) -> Span:
    return Span(_to_lsp(d.document, d.start), _to_lsp(d.document, max(d.start, d.end)))


class OpenDocument(Record):
    text: str
    version: int | None


class _Group:
    """Open documents linted together, and what their last lint read (resolved paths)."""

    def __init__(self, members: set[Path]) -> None:
        self.members = members
        self.reads: set[Path] = set()
        self.fixes: dict[bool, dict[Path, str]] = {}  # unsafe? -> the fixer's texts, at the members' versions


class Session:
    """The open documents of one editor and what cfgopt found in them. Documents are known by the path the editor
    gave (a folder opened through a symlink keeps its own paths); the engine reads them by their resolved path."""

    def __init__(self) -> None:
        self.documents: dict[Path, OpenDocument] = {}
        self.findings: dict[Path, list[Diagnostic]] = {}
        self.problems: dict[Path, list[Problem]] = {}
        self.notes: dict[Path, str] = {}  # a large document's "linted when saved"
        self._groups: dict[Path, _Group] = {}
        self.linted: list[tuple[Path, ...]] = []  # the documents of each lint run, in order (what a change costs)

    # ---------------------------------------------------------------- documents
    def update(self, path: Path, text: str, version: int | None = None) -> list[Path]:
        """`path` now holds `text` (opened or changed): lint what the change can alter; the documents whose
        findings were renewed."""
        before = self.documents.get(path)
        self.documents[path] = OpenDocument(text, version)
        if before is not None and before.text == text and path in self.findings:
            return [path]  # nothing changed: the findings stand, published again for this version
        if before is not None and self._large(path):
            return self._defer(path)
        return self._lint(self._group_for(path))

    def save(self, path: Path) -> list[Path]:
        """Saved: a large document, or one that reads the saved file, is linted now; a project config or
        requirement file saved re-lints every group (they are read from disk)."""
        from cfgopt.lint.project_config import CONFIG_NAMES
        from cfgopt.text.requirements.files import is_requirement_file

        if path.name in CONFIG_NAMES or is_requirement_file(path.name):
            return [p for group in self._all_groups() for p in self._lint(group)]
        real = real_path(path)
        waiting = [g for g in self._all_groups() if self._alone(g) and (path in g.members or real in g.reads)]
        return [p for group in waiting for p in self._lint(group)]

    def close(self, path: Path) -> list[Path]:
        """`path` closed: its group is linted again without it (its file on disk now stands for it)."""
        self.documents.pop(path, None)
        for table in (self.findings, self.problems, self.notes):
            table.pop(path, None)
        group = self._groups.pop(path, None)
        if group is None:
            return []
        group.members.discard(path)
        return self._lint(group) if group.members else []

    def _large(self, path: Path) -> bool:
        return len(self.documents[path].text) > LARGE

    def _alone(self, group: _Group) -> bool:
        """A large document's group: itself only, linted when opened and saved, never joined by another."""
        return any(self._large(p) for p in group.members if p in self.documents)

    def _defer(self, path: Path) -> list[Path]:
        """A large document changed: its findings wait for its save (said at its top); it leaves any group."""
        size = len(self.documents[path].text)
        limit = LARGE >> 20
        self.notes[path] = f"cfgopt: {size / 1e6:.1f} MB: linted when saved, not at each change (over {limit} MiB)"
        self.findings[path], self.problems[path] = [], []
        group = self._groups.get(path)
        if group is not None and group.members != {path}:
            group.members.discard(path)
            group.fixes.clear()
        self._groups[path] = _Group({path})
        return [path]

    def _all_groups(self) -> list[_Group]:
        return list({id(g): g for g in self._groups.values()}.values())

    def _merge(self, group: _Group, other: _Group) -> _Group:
        group.members |= other.members
        group.reads |= other.reads
        group.fixes.clear()
        for member in group.members:
            self._groups[member] = group
        return group

    def _group_for(self, path: Path) -> _Group:
        """The group of `path`, joined by every group whose last lint read it (a JSON opened after the YAML
        naming it); a large document stays alone."""
        group = self._groups.get(path) or _Group({path})
        self._groups[path] = group
        if self._large(path):
            return group
        real = real_path(path)
        for other in self._all_groups():
            if other is not group and real in other.reads and not self._alone(other):
                group = self._merge(group, other)
        return group

    def _lint(self, group: _Group) -> list[Path]:
        """Lint the group's documents together; the group of an open document its job reads joins it, and the
        whole is linted again (a reference typed in). A large document's group is linted alone: of its run,
        only its own findings are kept (the documents it reads keep those of their own group)."""
        group.fixes.clear()
        alone = self._alone(group)
        for _ in range(len(self.documents) + 1):
            members = sorted(group.members)
            self.linted.append(tuple(members))
            try:
                result = _lint_paths(members, self._overlay())
            except _config_errors() as exc:  # the project config cannot be used: one line, never a traceback
                return self._problem(members, f"cfgopt: project config not used: {_one_line(exc)}")
            except Exception as exc:  # noqa: BLE001 - never silent: a document that cannot be linted says so at its top
                why = f"{type(exc).__name__}: {_one_line(exc)}"
                return self._problem(members, f"cfgopt: internal error ({why}); please report this")
            group.reads = set(result.checked) | set(result.file_settings)
            joining = [
                p
                for p in self.documents
                if p not in group.members and real_path(p) in group.reads and not self._large(p)
            ]
            if alone or not joining:
                break
            for p in joining:
                group = self._merge(group, self._groups.get(p) or _Group({p}))
        self._distribute(result, members)
        return members

    def _overlay(self) -> dict[Path, str]:
        return {real_path(p): d.text for p, d in self.documents.items()}

    def _distribute(self, result: LintResult, members: list[Path]) -> None:
        by_file: dict[Path, list[Diagnostic]] = {}
        for d in result.diagnostics:
            by_file.setdefault(real_path(d.path), []).append(d)
        for path in members:
            real = real_path(path)
            self.findings[path] = by_file.get(real, [])
            self.problems[path] = [Problem(p.message) for p in result.problems if real_path(Path(p.path)) == real]
            self.notes.pop(path, None)

    def _problem(self, members: list[Path], message: str) -> list[Path]:
        for path in members:
            self.findings[path], self.problems[path] = [], [Problem(message)]
        return members

    def settings_for(self, path: Path) -> Settings | None:
        """The settings that judge `path`; None when its project config cannot be used (said by a diagnostic)."""
        try:
            return _resolver().settings_for(path)
        except _config_errors():
            return None

    # ---------------------------------------------------------------- fixes
    def at(self, path: Path, span: Span) -> list[Diagnostic]:
        """The findings of `path` whose span meets `span`."""
        return [d for d in self.findings.get(path, []) if _meets(span_of(d), span)]

    def fix_edits(self, d: Diagnostic) -> list[TextEdit]:
        """A finding's own fix as edits of its document (a display-only fix has none: it is never applied)."""
        if d.fix is None or d.fix.applicability == Applicability.DISPLAY:
            return []
        return [TextEdit(Span(_to_lsp(d.document, e.start), _to_lsp(d.document, e.end)), e.text) for e in d.fix.edits]

    def fixable(self, path: Path, unsafe: bool) -> bool:
        """Could `fix_all` change something: a finding of the group with a fix it applies (no fixer run). Never
        for a large document: the fixer would re-lint it after each fix (its quick fixes stay)."""
        group = self._groups.get(path)
        wanted = (Applicability.SAFE, Applicability.UNSAFE) if unsafe else (Applicability.SAFE,)
        return (
            group is not None
            and not self._alone(group)
            and any(
                d.fix is not None and d.fix.applicability in wanted
                for p in group.members
                for d in self.findings.get(p, [])
            )
        )

    def fix_all(self, path: Path, unsafe: bool) -> dict[Path, str]:
        """What `cfgopt fix` (with `--unsafe-fixes`: the speed plan too) makes of the group of `path`, checked as
        the command checks it: the new text of each open document it changes. Once per change of the group."""
        group = self._groups.get(path)
        if group is None or any(p in self.notes for p in group.members):
            return {}
        if unsafe not in group.fixes:
            group.fixes[unsafe] = self._fix_run(sorted(group.members), unsafe)
        return group.fixes[unsafe]

    def _fix_run(self, members: list[Path], unsafe: bool) -> dict[Path, str]:
        from cfgopt.lint.fixer import fix_paths
        from cfgopt.lint.project_config import CommandLine, Resolver

        try:
            cli = CommandLine(unsafe_fixes=unsafe, force_exclude=True)
            result = fix_paths(members, Resolver(cli), True, False, self._overlay())
        except _config_errors():  # the project config cannot be used: said by a diagnostic; no fix
            return {}
        by_real = {real_path(p): p for p in self.documents}
        return {by_real[p]: text for p, text in result.fixed.items() if p in by_real}

    # ---------------------------------------------------------------- hover and completion
    def hover(self, path: Path, position: Position) -> str | None:
        """The docs of the rules whose findings are under the cursor, else the schema's help for the key."""
        found = self.at(path, Span(position, position))
        if found:
            return "\n\n---\n\n".join(dict.fromkeys(_rule_page(d.code) for d in found))
        if path.suffix not in (".yaml", ".yml"):
            return None
        settings = self.settings_for(path)
        key = _key_at(self._text(path), position)
        spec = settings.lf_schema.fields.get(key or "") if settings is not None else None
        if spec is None:
            return None
        return _field_page(spec, settings.llamafactory_version)

    def complete(self, path: Path, position: Position) -> list[Completion]:
        settings = self.settings_for(path)
        if settings is None:
            return []
        if path.suffix in (".yaml", ".yml"):
            return _yaml_completions(self._text(path), position, settings)
        if path.suffix == ".json":
            return _json_completions(self._text(path), position, settings)
        return []

    def _text(self, path: Path) -> str:
        found = self.documents.get(path)
        return found.text if found is not None else ""


def _resolver() -> Resolver:
    from cfgopt.lint.project_config import CommandLine, Resolver

    # as pre-commit runs it: a file the project config excludes is skipped even when named (the open documents)
    return Resolver(CommandLine(force_exclude=True))


def _lint_paths(members: list[Path], overlay: dict[Path, str]) -> LintResult:
    from cfgopt.lint.engine import lint_paths

    return lint_paths(members, _resolver(), recognised_only=True, overlay=overlay)


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())[:500] or type(exc).__name__


def _config_errors() -> tuple[type[Exception], ...]:
    """A project config or a release that cannot be used: the command line's exit 2, the editor's one line."""
    from cfgopt.knowledge.versions import VersionError
    from cfgopt.lint.project_config import ConfigError

    return ConfigError, VersionError


def _meets(a: Span, b: Span) -> bool:
    return a.start <= b.end and b.start <= a.end


def _rule_page(code: str) -> str:
    from cfgopt.rules import by_code
    from cfgopt.rules.pages import render_page

    rule = by_code(code)
    if rule is None:  # doctor codes and the like: no page of their own
        return f"**{code}**: `cfgopt rule {code}`"
    return render_page(rule.docs(), "markdown")


def _field_page(spec, version: str) -> str:
    lines = [f"**`{spec.name}`** (LLaMA-Factory {version}): {spec.help or 'no help text'}"]
    lines.append(f"- type: {' | '.join(spec.types)}; default: `{spec.default!r}`")
    if spec.choices:
        lines.append(f"- one of: {', '.join(f'`{c}`' for c in spec.choices)}")
    return "\n".join(lines)


_YAML_KEY = re.compile(r"^\s*([A-Za-z_][\w.-]*)\s*:")


def _line_before(text: str, position: Position) -> str:
    index = line_index(text)
    start, _ = index.line_bounds(position[0])
    return text[start : index.offset(position)]


def _key_at(text: str, position: Position) -> str | None:
    start, end = line_index(text).line_bounds(position[0])
    match = _YAML_KEY.match(text[start:end])
    return match.group(1) if match else None


def _yaml_completions(text: str, position: Position, settings: Settings) -> list[Completion]:
    """At the start of a line: the keys `llamafactory-cli train` accepts in the judged release, those not yet
    set; after `key:`, the key's choices (an Enum/Literal's values, true/false for a bool)."""
    fields = settings.lf_schema.group("train")
    before = _line_before(text, position)
    value = re.match(r"^([A-Za-z_][\w.-]*)\s*:\s*(\S*)$", before)
    if value:
        spec = fields.get(value.group(1))
        if spec is None:
            return []
        choices = [str(c) for c in spec.choices or ()] or (["true", "false"] if spec.is_bool else [])
        return [Completion(c, spec.name, spec.help, "value") for c in choices]
    if before.strip() and not re.fullmatch(r"[A-Za-z_][\w.-]*", before):
        return []
    present = {m.group(1) for m in (_YAML_KEY.match(line) for line in text.splitlines()) if m}
    return [
        Completion(name, " | ".join(spec.types), spec.help, "key")
        for name, spec in sorted(fields.items())
        if name not in present and name not in settings.lf_schema.not_settable
    ]


def json_object_path(text: str) -> list[str]:
    """The keys of the objects enclosing the end of `text` (a JSON prefix), outermost first ("" for the top
    level): one pass over the text, a string's escapes skipped, so an unclosed string or thousands of escaped
    quotes cost one read, never a search from each quote."""
    stack: list[str] = []
    last_string = ""
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == '"':
            start = i + 1
            i = start
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            last_string = text[start : min(i, n)]
        elif ch == "{":
            stack.append(last_string)
        elif ch == "}" and stack:
            stack.pop()
        i += 1
    return stack


def _json_completions(text: str, position: Position, settings: Settings) -> list[Completion]:
    """Inside a DeepSpeed JSON: the keys of the object the cursor is in (the top level's, or a strict
    section's fields and aliases in the judged release)."""
    ds = settings.ds_schema
    stack = json_object_path(text[: line_index(text).offset(position)])
    if len(stack) <= 1:
        keys = sorted(ds.top_level_keys)
    elif len(stack) == 2 and stack[1] in ds.sections:
        keys = sorted(ds.field_names(ds.sections[stack[1]]))
    else:
        return []
    return [Completion(k, f"DeepSpeed {ds.version}", "", "key") for k in keys]
