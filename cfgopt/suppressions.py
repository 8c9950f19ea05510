"""Suppressions: `# cfgopt: ignore[CODE, ...]` comments, `# cfgopt: ignore-file[...]`, and the project
config's `per-file-ignores`, applied in one place after the rules ran (`apply_suppressions`, called by
`engine.Project.diagnostics`), and the unused ones reported as CFG004.

Comments exist only in YAML and shell scripts; PyYAML drops them, so `scan` finds them in the text: a `#`
that starts a word, outside quotes (a small per-line scanner), and, for a YAML file that parsed, outside
every key and scalar span (a `#` inside a quoted or block scalar is text). JSON has no comments: use
`per-file-ignores` there.

Where a suppression applies (docs/configuration.md):
- a comment after a value applies to its own line; in a shell script, to the whole command it ends
  (`\\`-continued lines are one logical line, and a comment cannot sit inside one);
- a comment on a line of its own applies to the next line that is not blank or a comment (in a script, the
  whole command starting there), so `# cfgopt: ignore[...]` can sit right above the finding;
- `ignore-file` anywhere in the file applies to the whole file;
- without `[...]` (`# cfgopt: ignore`), every code.
A suppression that suppresses nothing, or names an unknown code, is reported as CFG004 with a safe fix
removing it (or only the unused codes). Codes of rules not selected for the file are left alone: whether
they would fire is unknown (ruff's RUF100 pitfall, astral-sh/ruff#2194).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cfgopt.diagnostics import Applicability, Diagnostic, Edit, Fix
from cfgopt.document import BREAK_CHARS, Document, real_path
from cfgopt.loaders.shell import layout as shell_layout
from cfgopt.source import Kind, Node

if TYPE_CHECKING:
    from cfgopt.engine import Project
    from cfgopt.settings import Settings

DIRECTIVE = re.compile(
    r"#[ \t]*cfgopt[ \t]*:[ \t]*(?P<kind>ignore-file|ignore)(?![\w-])(?:[ \t]*\[(?P<codes>[^\]\r\n]*)\])?",
    re.IGNORECASE,
)
_CODE_TOKEN = re.compile(r"[^,\s]+")


@dataclass
class Suppression:
    start: int  # offset of the directive's `#`
    end: int  # end of the directive (after `]`)
    line: int  # 1-based
    own_line: bool  # nothing but whitespace before the `#`
    file_level: bool
    codes: list[tuple[str, int, int]] | None  # (as written, start, end); None: every code
    list_span: tuple[int, int] = (0, 0)  # inside the brackets
    covers: tuple[int, int] = (0, 0)  # first and last line it applies to (not for file_level)
    used: set[str] = field(default_factory=set)

    def applies_to(self, code: str, resolve) -> bool:
        return self.codes is None or any(resolve(w) == code for w, _, _ in self.codes)


# --------------------------------------------------------------------------- scanning


def _comment_start(line: str, shell: bool) -> int | None:
    """Index of the `#` that starts a comment in `line`, outside quotes; None if there is none."""
    quote = ""
    i, n = 0, len(line)
    while i < n:
        ch = line[i]
        if quote:
            if ch == "\\" and quote == '"':
                i += 2
                continue
            if ch == quote:
                if quote == "'" and not shell and line[i + 1 : i + 2] == "'":
                    i += 2  # YAML's '' inside a single-quoted scalar
                    continue
                quote = ""
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return i
        elif ch == "\\" and shell:
            i += 2
            continue
        elif ch in "'\"" and (shell or i == 0 or line[i - 1] in " \t[{,:"):
            quote = ch
        i += 1
    return None


def _spans(root: Node | None) -> list[tuple[int, int]]:
    """Key and scalar spans of a parsed YAML document: a `#` inside one is text, not a comment."""
    out: list[tuple[int, int]] = []

    def visit(node: Node) -> None:
        if node.entries is None and node.items is None:
            out.append((node.start, node.end))
        for entry in node.entries or ():
            out.append((entry.key_start, entry.key_end))
            visit(entry.node)
        for item in node.items or ():
            visit(item)

    if root is not None:
        visit(root)
    return out


def _logical_lines(doc: Document, shell: bool) -> list[tuple[int, int]]:
    """For each 1-based line (index line-1): the first and last line of the logical line it belongs to."""
    count = len(doc.line_starts)
    if not shell:
        return [(n, n) for n in range(1, count + 1)]
    out: list[tuple[int, int]] = []
    first = 1
    for n in range(1, count + 1):
        if not doc.line_text(n).endswith("\\"):
            out.extend([(first, n)] * (n - first + 1))
            first = n + 1
    if first <= count:
        out.extend([(first, count)] * (count - first + 1))
    return out


def scan(doc: Document, shell: bool, spans: list[tuple[int, int]] | None = None) -> list[Suppression]:
    text = doc.text
    if "cfgopt" not in text and "CFGOPT" not in text.upper():
        return []
    candidates = sorted({doc.position(m.start())[0] for m in re.finditer("cfgopt", text, re.IGNORECASE)})
    found: list[Suppression] = []
    # In a script, text inside a heredoc body or a multi-line string is data, not a comment of the script
    opaque = shell_layout(text).in_opaque if shell else (lambda _offset: False)
    logical: list[tuple[int, int]] | None = None
    for line in candidates:
        line_text = doc.line_text(line)
        begin = _comment_start(line_text, shell)
        if begin is None:
            continue
        line_start = doc.line_starts[line - 1]
        if spans and any(s <= line_start + begin < e for s, e in spans):
            continue  # inside a scalar that spans lines (quoted, block)
        if opaque(line_start + begin):
            continue
        m = DIRECTIVE.search(line_text, begin)
        if m is None:
            continue
        codes = None
        list_span = (0, 0)
        if m.group("codes") is not None:
            inner_start = line_start + m.start("codes")
            tokens = _CODE_TOKEN.finditer(m.group("codes"))
            codes = [(t.group(), inner_start + t.start(), inner_start + t.end()) for t in tokens]
            list_span = (inner_start, line_start + m.end("codes"))
        sup = Suppression(
            start=line_start + m.start(),
            end=line_start + m.end(),
            line=line,
            own_line=not line_text[: m.start()].strip(),
            file_level=m.group("kind").lower() == "ignore-file",
            codes=codes,
            list_span=list_span,
        )
        if not sup.file_level:
            if logical is None:
                logical = _logical_lines(doc, shell)
            target = line
            if sup.own_line:
                target = _next_code_line(doc, line) or line
            sup.covers = logical[target - 1]
        found.append(sup)
    return found


def _next_code_line(doc: Document, line: int) -> int | None:
    for n in range(line + 1, len(doc.line_starts) + 1):
        stripped = doc.line_text(n).strip()
        if stripped and not stripped.startswith("#"):
            return n
    return None


# --------------------------------------------------------------------------- applying


class _Codes:
    """Rule codes and names, for reading the codes written in a suppression."""

    def __init__(self) -> None:
        from cfgopt.rules import rule_classes

        self.codes = {c.code for c in rule_classes()}
        self.names = {c.name: c.code for c in rule_classes()}

    def resolve(self, written: str) -> str | None:
        upper = written.upper()
        if upper in self.codes:
            return upper
        return self.names.get(written.lower())


def _documents(project: Project) -> dict:
    """Linted documents that can hold comments: resolved path -> (document, is a shell script, spans)."""
    from cfgopt import discovery

    out: dict = {}
    for src in project.sources:
        key = real_path(src.document.path)
        if key in project.quiet or src.kind in (Kind.DEEPSPEED, Kind.UNKNOWN):
            continue
        shell = discovery.loader_for(src.document.path) == "script"
        if key not in out:
            out[key] = (src.document, shell, [] if shell else None)
        if not shell and src.error is None:
            out[key] = (src.document, shell, _spans(src.root))
    return out


def apply_suppressions(project: Project, diags: list[Diagnostic]) -> list[Diagnostic]:
    """Drop what `per-file-ignores` and suppression comments suppress, strip fixes of `unfixable` rules,
    and add a CFG004 diagnostic for every suppression that suppressed nothing."""
    settings_for = project.settings.for_path
    kept = [
        d
        for d in diags
        if real_path(d.path) not in project.quiet and not settings_for(d.path).ignored_in_file(d.path, d.code)
    ]
    documents = _documents(project)
    found: dict = {}
    for key, (doc, shell, spans) in documents.items():
        sups = scan(doc, shell, spans)
        if sups:
            found[key] = (doc, sups)
    if found:
        codes = _Codes()
        out: list[Diagnostic] = []
        for d in kept:
            entry = found.get(real_path(d.path))
            if entry is None or not _suppressed(d, entry[1], codes):
                out.append(d)
        for doc, sups in found.values():
            out.extend(_unused(doc, sups, settings_for(doc.path), codes))
        kept = out
    for d in kept:
        if d.fix is not None and not settings_for(d.path).is_fixable(d.code):
            d.fix = None
    return kept


def _suppressed(diag: Diagnostic, sups: list[Suppression], codes: _Codes) -> bool:
    line = diag.line_column[0]
    hit = False
    for sup in sups:
        if not sup.file_level and sup.covers[0] <= line <= sup.covers[1] and sup.applies_to(diag.code, codes.resolve):
            sup.used.add(diag.code)
            hit = True
    if hit:
        return True
    for sup in sups:
        if sup.file_level and sup.applies_to(diag.code, codes.resolve):
            sup.used.add(diag.code)
            hit = True
    return hit


def _unused(doc: Document, sups: list[Suppression], settings: Settings, codes: _Codes) -> list[Diagnostic]:
    from cfgopt.rules.cfg004_unused_suppression import UnusedSuppression as Rule
    from cfgopt.suggest import closest

    if not settings.is_selected(Rule.code) or settings.ignored_in_file(doc.path, Rule.code):
        return []
    out: list[Diagnostic] = []
    for sup in sups:
        first, last = sup.covers
        where = (
            "in this file" if sup.file_level else (f"on line {first}" if first == last else f"on lines {first}-{last}")
        )
        if sup.codes is None or not sup.codes:
            if sup.used:
                continue
            reasons = [f"nothing to suppress {where}"]
            drop_all = True
            dropped: set[int] = set()
        else:
            reasons = []
            dropped = set()
            for i, (written, _, _) in enumerate(sup.codes):
                code = codes.resolve(written)
                if code is None:
                    hint = closest(written.upper(), sorted(codes.codes)) or closest(written.lower(), codes.names)
                    reasons.append(f"unknown rule code `{written}`" + (f" (did you mean `{hint}`?)" if hint else ""))
                    dropped.add(i)
                elif code == Rule.code or not settings.is_selected(code) or settings.ignored_in_file(doc.path, code):
                    continue  # not run on this file: whether it would fire here is unknown
                elif code not in sup.used:
                    reasons.append(f"no {code} finding {where}")
                    dropped.add(i)
            if not dropped:
                continue
            drop_all = len(dropped) == len(sup.codes)
        fix = _removal(doc, sup) if drop_all else _shrink(sup, dropped)
        message = "Unused suppression: " + "; ".join(reasons)
        out.append(
            Diagnostic(
                document=doc,
                start=sup.start,
                end=sup.end,
                code=Rule.code,
                name=Rule.name,
                severity=Rule.severity,
                message=message,
                fix=fix,
            )
        )
    return out


def _removal(doc: Document, sup: Suppression) -> Fix:
    """Delete the directive only: a note after it (`# cfgopt: ignore[LF003] keep 10 for the dashboard`)
    stays a comment, and a line holding nothing else goes with its line break."""
    text = doc.text
    line_start = doc.line_starts[sup.line - 1]
    line_end = doc.line_end(sup.start)
    content_end = line_end
    while content_end > sup.start and text[content_end - 1] in BREAK_CHARS:
        content_end -= 1
    note = text[sup.end : content_end]
    if note.strip():
        note_start = sup.end + len(note) - len(note.lstrip())
        keep_hash = not text.startswith("#", note_start)
        edit = Edit(sup.start, note_start, "# " if keep_hash else "")
    elif sup.own_line:
        if line_end == len(text) and line_start > 0:
            # the last line has no line break: take the one before it, so no line break is added or left over
            edit = Edit(doc.line_starts[sup.line - 2] + len(doc.line_text(sup.line - 1)), line_end, "")
        else:
            edit = Edit(line_start, line_end, "")
    else:
        begin = sup.start
        while begin > line_start and text[begin - 1] in " \t":
            begin -= 1
        edit = Edit(begin, content_end, "")
    return Fix("Remove the unused suppression comment", Applicability.SAFE, [edit])


def _shrink(sup: Suppression, dropped: set[int]) -> Fix:
    assert sup.codes is not None
    keep = [w for i, (w, _, _) in enumerate(sup.codes) if i not in dropped]
    gone = ", ".join(w for i, (w, _, _) in enumerate(sup.codes) if i in dropped)
    return Fix(
        f"Remove {gone} from the suppression",
        Applicability.SAFE,
        [Edit(sup.list_span[0], sup.list_span[1], ", ".join(keep))],
    )
