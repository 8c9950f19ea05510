"""Suppressions: `# cfgopt: ignore[CODE, ...]` comments, `# cfgopt: ignore-file[...]`, and the project
config's `per-file-ignores`, applied in one place after the rules ran (`apply_suppressions`, called by
`engine.LintProject.diagnostics`). Each comment records what it suppressed; CFG004
(`cfgopt/rules/cfg004_unused_suppression.py`, a project-level rule) reports the unused ones with the
removal fixes written here. This module knows no rule and no engine: the caller passes the rule codes.

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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from cfgopt.loaders.shell import layout as shell_layout
from cfgopt.text.diagnostics import Applicability, Diagnostic, Edit, Fix
from cfgopt.text.document import BREAK_CHARS, Document, real_path
from cfgopt.text.patterns import lazy
from cfgopt.text.source import Kind, Node, Source

TYPE_CHECKING = False
if TYPE_CHECKING:
    from cfgopt.job.settings import Settings

DIRECTIVE = lazy(
    r"#[ \t]*cfgopt[ \t]*:[ \t]*(?P<kind>ignore-file|ignore)(?![\w-])(?:[ \t]*\[(?P<codes>[^\]\r\n]*)\])?",
    re.IGNORECASE,
)
_CODE_TOKEN = lazy(r"[^,\s]+")


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


@dataclass(frozen=True)
class RuleCodes:
    """Rule codes and names, for reading the codes written in a suppression (a name works as its code)."""

    codes: frozenset[str]
    names: dict[str, str]  # name -> code

    def resolve(self, written: str) -> str | None:
        upper = written.upper()
        if upper in self.codes:
            return upper
        return self.names.get(written.lower())


@dataclass
class Matched:
    """The suppression comments of the linted files, each with the codes it suppressed on this run
    (`Suppression.used`): what CFG004 (`Rule.check_project`) reads to report the unused ones."""

    files: list[tuple[Document, list[Suppression]]]
    codes: RuleCodes
    # Files that do not parse (CFG001): no other rule ran on them, so no suppression there is known unused.
    unparsed: set[Path] = field(default_factory=set)


def _documents(sources: list[Source], quiet: set[Path]) -> dict:
    """Linted documents that can hold comments: resolved path -> (document, is a shell script, spans)."""
    from cfgopt.loaders import discovery

    out: dict = {}
    for src in sources:
        key = real_path(src.document.path)
        if key in quiet or src.kind in (Kind.DEEPSPEED, Kind.UNKNOWN):
            continue
        shell = discovery.loader_for(src.document.path) == "script"
        if key not in out:
            out[key] = (src.document, shell, [] if shell else None)
        if not shell and src.error is None:
            out[key] = (src.document, shell, _spans(src.root))
    return out


def apply_suppressions(
    sources: list[Source],
    quiet: set[Path],
    settings_for: Callable[[Path], Settings],
    codes: Callable[[], RuleCodes],
    diags: list[Diagnostic],
) -> tuple[list[Diagnostic], Matched | None]:
    """Drop the findings in `quiet` files and what `per-file-ignores` and suppression comments suppress;
    return the rest and the comments found (None when there are none). `codes` is called only then."""
    kept = [
        d for d in diags if real_path(d.path) not in quiet and not settings_for(d.path).ignored_in_file(d.path, d.code)
    ]
    found: list[tuple[Document, list[Suppression]]] = []
    for doc, shell, spans in _documents(sources, quiet).values():
        sups = scan(doc, shell, spans)
        if sups:
            found.append((doc, sups))
    if not found:
        return kept, None
    unparsed = {
        real_path(src.document.path)
        for src in sources
        if src.error is not None and src.kind != Kind.LF_CLI  # a script's command lines fail one by one
    }
    matched = Matched(found, codes(), unparsed)
    by_path = {real_path(doc.path): sups for doc, sups in found}
    out: list[Diagnostic] = []
    for d in kept:
        sups = by_path.get(real_path(d.path))
        if sups is None or not _suppressed(d, sups, matched.codes):
            out.append(d)
    return out, matched


def _suppressed(diag: Diagnostic, sups: list[Suppression], codes: RuleCodes) -> bool:
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


# --------------------------------------------------------------------------- removing (CFG004's fixes)


def removal_fix(doc: Document, sup: Suppression) -> Fix:
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


def shrink_fix(sup: Suppression, dropped: set[int]) -> Fix:
    """Remove only the codes at the indexes `dropped` from the comment's list."""
    assert sup.codes is not None
    keep = [w for i, (w, _, _) in enumerate(sup.codes) if i not in dropped]
    gone = ", ".join(w for i, (w, _, _) in enumerate(sup.codes) if i in dropped)
    return Fix(
        f"Remove {gone} from the suppression",
        Applicability.SAFE,
        [Edit(sup.list_span[0], sup.list_span[1], ", ".join(keep))],
    )
