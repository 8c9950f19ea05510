"""What the language server knows, without the protocol: the open documents (unsaved text included), their
findings from the same engine as `cfgopt lint`, their fixes as text edits, hover texts and completions.

Positions are LSP's: 0-based lines and UTF-16 code units (the protocol's default encoding); the engine counts
characters, so every position crosses `_to_lsp` / `_from_lsp`.

Each change lints the open documents of the changed file's folder together, with every open document's text
standing in for its file (`overlay`), so a YAML and the DeepSpeed JSON it names are judged as one job while
either is being typed, with the project config of their folder (`project_config.Resolver`, as the command line
resolves it; a fresh resolver per run, so an edited cfgopt.toml counts at the next keystroke).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from cfgopt.text.diagnostics import Applicability, Diagnostic
from cfgopt.text.document import real_path

if TYPE_CHECKING:
    from cfgopt.job.settings import Settings
    from cfgopt.text.document import Document

Position = tuple[int, int]  # (line, UTF-16 character), both 0-based


class Span(NamedTuple):
    start: Position
    end: Position


class TextEdit(NamedTuple):
    span: Span
    text: str


class Completion(NamedTuple):
    label: str
    detail: str
    documentation: str
    kind: str  # "key" or "value"


class Problem(NamedTuple):
    """A file that could not be read as a config: shown at its first line."""

    message: str


def _utf16(text: str) -> int:
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _to_lsp(doc: Document, offset: int) -> Position:
    line, column = doc.position(offset)
    text = doc.line_text(line) if doc.text else ""
    return line - 1, _utf16(text[: column - 1])


def _from_lsp(text: str, position: Position) -> int:
    """The character offset of an LSP position in `text` (clamped to its line and to the text)."""
    line, units = position
    starts = [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", text)]
    if line >= len(starts):
        return len(text)
    start = starts[line]
    end = starts[line + 1] if line + 1 < len(starts) else len(text)
    offset, counted = start, 0
    while offset < end and counted < units and text[offset] not in "\r\n":
        counted += _utf16(text[offset])
        offset += 1
    return offset


def span_of(d: Diagnostic) -> Span:
    return Span(_to_lsp(d.document, d.start), _to_lsp(d.document, max(d.start, d.end)))


class Session:
    """The open documents of one editor and what cfgopt found in them at the last change."""

    def __init__(self) -> None:
        self.texts: dict[Path, str] = {}  # resolved path -> the editor's text
        self.findings: dict[Path, list[Diagnostic]] = {}
        self.problems: dict[Path, list[Problem]] = {}

    # ---------------------------------------------------------------- documents
    def update(self, path: Path, text: str) -> list[Path]:
        """`path` now holds `text` (opened or changed): lint its folder's open documents; the paths whose
        findings were renewed."""
        self.texts[real_path(path)] = text
        return self.lint_folder(real_path(path).parent)

    def close(self, path: Path) -> None:
        key = real_path(path)
        self.texts.pop(key, None)
        self.findings.pop(key, None)
        self.problems.pop(key, None)

    def lint_folder(self, folder: Path) -> list[Path]:
        from cfgopt.lint.engine import lint_paths

        paths = sorted(p for p in self.texts if p.parent == folder)
        result = lint_paths(paths, _resolver(), recognised_only=True, overlay=dict(self.texts))
        for path in paths:
            self.findings[path] = [d for d in result.diagnostics if real_path(d.path) == path]
            self.problems[path] = [Problem(p.message) for p in result.problems if real_path(Path(p.path)) == path]
        return paths

    def settings_for(self, path: Path) -> Settings:
        return _resolver().settings_for(path)

    # ---------------------------------------------------------------- fixes
    def at(self, path: Path, span: Span) -> list[Diagnostic]:
        """The findings of `path` whose span meets `span`."""
        return [d for d in self.findings.get(real_path(path), []) if _meets(span_of(d), span)]

    def fix_edits(self, d: Diagnostic) -> list[TextEdit]:
        """A finding's own fix as edits of its document (a display-only fix has none: it is never applied)."""
        if d.fix is None or d.fix.applicability == Applicability.DISPLAY:
            return []
        return [TextEdit(Span(_to_lsp(d.document, e.start), _to_lsp(d.document, e.end)), e.text) for e in d.fix.edits]

    def fix_all(self, path: Path, unsafe: bool) -> dict[Path, str]:
        """What `cfgopt fix` (with `--unsafe-fixes`: the speed plan too) makes of the open documents of the
        folder, checked as the command checks it: the new text of each file it changes."""
        from cfgopt.lint.fixer import fix_paths
        from cfgopt.lint.project_config import CommandLine, Resolver

        key = real_path(path)
        paths = sorted(p for p in self.texts if p.parent == key.parent)
        result = fix_paths(paths, Resolver(CommandLine(unsafe_fixes=unsafe)), True, False, dict(self.texts))
        return {p: text for p, text in result.fixed.items() if p in self.texts}

    # ---------------------------------------------------------------- hover and completion
    def hover(self, path: Path, position: Position) -> str | None:
        """The docs of the rules whose findings are under the cursor, else the schema's help for the key."""
        found = self.at(path, Span(position, position))
        if found:
            return "\n\n---\n\n".join(dict.fromkeys(_rule_page(d.code) for d in found))
        key = _key_at(self.texts.get(real_path(path), ""), position)
        spec = self.settings_for(path).lf_schema.fields.get(key or "") if path.suffix in (".yaml", ".yml") else None
        if spec is None:
            return None
        return _field_page(spec, self.settings_for(path).llamafactory_version)

    def complete(self, path: Path, position: Position) -> list[Completion]:
        text = self.texts.get(real_path(path), "")
        settings = self.settings_for(path)
        if path.suffix in (".yaml", ".yml"):
            return _yaml_completions(text, position, settings)
        if path.suffix == ".json":
            return _json_completions(text, position, settings)
        return []


def _resolver():
    from cfgopt.lint.project_config import CommandLine, Resolver

    return Resolver(CommandLine())


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
    offset = _from_lsp(text, position)
    return text[text.rfind("\n", 0, offset) + 1 : offset]


def _key_at(text: str, position: Position) -> str | None:
    line_start = text.rfind("\n", 0, _from_lsp(text, position)) + 1
    line_end = text.find("\n", line_start)
    match = _YAML_KEY.match(text[line_start : line_end if line_end >= 0 else len(text)])
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


_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}]|:')


def _json_completions(text: str, position: Position, settings: Settings) -> list[Completion]:
    """Inside a DeepSpeed JSON: the keys of the object the cursor is in (the top level's, or a strict
    section's fields and aliases in the judged release)."""
    ds = settings.ds_schema
    stack: list[str] = []
    last_string = ""
    for token in _JSON_TOKEN.findall(text[: _from_lsp(text, position)]):
        if token == "{":
            stack.append(last_string)
        elif token == "}":
            if stack:
                stack.pop()
        elif token != ":":
            last_string = token[1:-1]
    if len(stack) <= 1:
        keys = sorted(ds.top_level_keys)
    elif len(stack) == 2 and stack[1] in ds.sections:
        keys = sorted(ds.field_names(ds.sections[stack[1]]))
    else:
        return []
    return [Completion(k, f"DeepSpeed {ds.version}", "", "key") for k in keys]
