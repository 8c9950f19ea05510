"""A small POSIX shell lexer: words with their spans, the way bash splits a command line.

It understands what a `llamafactory-cli` command line in a training script uses: blanks, `\\`-newline
continuations, single and double quotes, `$'...'`, `$(...)` and `$((...))` (nested, with quotes inside),
`${...}`, backticks, comments, redirections and heredocs (`<<EOF`, `<<-EOF`, `<<'EOF'`). It does not run or
expand anything: a word holding an expansion is marked `literal=False`, because its value is known only when
the script runs. For words without expansions, the values equal `shlex.split(posix=True)`'s
(tests/test_shell_lexer.py checks this).

Every loop advances at least one character per iteration and nesting is capped (`MAX_NESTING`), so the lexer
ends in linear time on any input, including an unterminated quote or a backslash at the end of the file.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

BLANKS = " \t"
# Characters that end an unquoted word. A lone CR is a blank here (bash would keep it in the word, but a
# script with CRLF line endings is read as the user sees it, as the rest of cfgopt does).
_WORD_END = " \t\r\n;&|()<>"
MAX_NESTING = 64


@dataclass
class Word:
    text: str  # the value after quote removal; expansions kept as written
    start: int
    end: int
    literal: bool = True  # no `$`, backtick or ANSI-C expansion: the value is known without running anything


@dataclass
class Command:
    words: list[Word] = field(default_factory=list)
    end: int = 0  # offset just past the last character that belongs to the command


@dataclass
class ScriptLayout:
    """Where a script's text is not shell code a tool may edit: heredoc bodies (they are data written
    somewhere else) and quoted strings that span lines; and where its comments are."""

    opaque: list[tuple[int, int]] = field(default_factory=list)
    comments: list[tuple[int, int]] = field(default_factory=list)

    def in_opaque(self, offset: int) -> bool:
        return _inside(self.opaque, offset)

    def in_comment(self, offset: int) -> bool:
        return _inside(self.comments, offset)

    def overlaps_opaque(self, start: int, end: int) -> bool:
        return any(start < e and s < max(end, start + 1) for s, e in self.opaque)


def _inside(regions: list[tuple[int, int]], offset: int) -> bool:
    """Is offset inside one of the regions? They do not overlap, except a string inside a `$(...)` that is
    itself inside a longer string, so look at the few that start at or before offset. Sorted by `layout`."""
    i = bisect.bisect_right(regions, (offset, float("inf")))
    return any(s <= offset < e for s, e in regions[max(0, i - 4) : i])


def _continuation(text: str, i: int) -> int:
    """Length of a `\\`-newline at i (0 if there is none)."""
    if text.startswith("\\\n", i):
        return 2
    if text.startswith("\\\r\n", i):
        return 3
    return 0


class _Lexer:
    def __init__(self, text: str) -> None:
        self.text = text
        self.n = len(text)
        self.layout = ScriptLayout()
        self.pending_heredocs: list[tuple[str, bool]] = []  # (delimiter, strip leading tabs)

    # ------------------------------------------------------------------ words
    def word(self, i: int, depth: int = 0) -> tuple[Word, int]:
        """The word starting at i (i is not a blank or an operator)."""
        text, n = self.text, self.n
        out: list[str] = []
        literal = True
        start = i
        while i < n:
            ch = text[i]
            cont = _continuation(text, i)
            if cont:
                i += cont
                continue
            if ch in _WORD_END:
                break
            if ch == "\\":
                if i + 1 < n:
                    out.append(text[i + 1])
                    i += 2
                else:  # a backslash at the end of the file is a literal backslash
                    out.append("\\")
                    i += 1
            elif ch == "'":
                close = text.find("'", i + 1)
                close = n if close == -1 else close
                out.append(text[i + 1 : close])
                self._note_string(i, close)
                i = close + 1
            elif ch == '"':
                value, end, lit = self._double_quoted(i, depth)
                out.append(value)
                literal = literal and lit
                i = end
            elif ch == "$" and i + 1 < n and text[i + 1] in "'({":
                end = self._dollar(i, depth)
                out.append(text[i:end])
                literal = False
                i = end
            elif ch == "`":
                end = self._backtick(i)
                out.append(text[i:end])
                literal = False
                i = end
            else:
                if ch == "$" and i + 1 < n and (text[i + 1].isalnum() or text[i + 1] in "_@*#?$!-"):
                    literal = False
                out.append(ch)
                i += 1
        return Word("".join(out), start, min(i, n), literal), min(i, n)

    def _note_string(self, open_at: int, close_at: int) -> None:
        if "\n" in self.text[open_at:close_at]:
            self.layout.opaque.append((open_at, min(close_at + 1, self.n)))

    def _double_quoted(self, i: int, depth: int) -> tuple[str, int, bool]:
        text, n = self.text, self.n
        out: list[str] = []
        literal = True
        j = i + 1
        while j < n and text[j] != '"':
            ch = text[j]
            if ch == "\\" and j + 1 < n:
                nxt = text[j + 1]
                if nxt == "\n":
                    j += 2
                    continue
                out.append(nxt if nxt in '$`"\\' else ch + nxt)
                j += 2
            elif ch == "$" and j + 1 < n and text[j + 1] in "({":
                end = self._dollar(j, depth)
                out.append(text[j:end])
                literal = False
                j = end
            elif ch == "`":
                end = self._backtick(j)
                out.append(text[j:end])
                literal = False
                j = end
            else:
                if ch == "$" and j + 1 < n and (text[j + 1].isalnum() or text[j + 1] in "_@*#?$!-"):
                    literal = False
                out.append(ch)
                j += 1
        self._note_string(i, j)
        return "".join(out), min(j + 1, n), literal

    def _dollar(self, i: int, depth: int) -> int:
        """End of `$'...'`, `$(...)`, `$((...))` or `${...}` starting at i."""
        text, n = self.text, self.n
        kind = text[i + 1]
        if kind == "'":
            j = i + 2
            while j < n and text[j] != "'":
                j += 2 if text[j] == "\\" else 1
            self._note_string(i, min(j, n))
            return min(j + 1, n)
        if kind == "{":
            j, level = i + 2, 1
            while j < n and level:
                ch = text[j]
                if ch == "\\":
                    j += 2
                    continue
                if ch in "'\"":
                    close = text.find(ch, j + 1)
                    j = n if close == -1 else close + 1
                    continue
                level += 1 if ch == "{" else -1 if ch == "}" else 0
                j += 1
            return min(j, n)
        # $( ... ): the commands inside, up to the matching parenthesis
        if depth >= MAX_NESTING:
            return n
        return self.commands(i + 2, depth + 1)

    def _backtick(self, i: int) -> int:
        text, n = self.text, self.n
        j = i + 1
        while j < n and text[j] != "`":
            j += 2 if text[j] == "\\" else 1
        return min(j + 1, n)

    # ------------------------------------------------------------------ commands
    def redirection(self, i: int, depth: int) -> int:
        """Skip a redirection operator at i and its target word; note a heredoc."""
        text, n = self.text, self.n
        heredoc = text.startswith("<<", i) and not text.startswith("<<<", i)
        j = i
        while j < n and text[j] in "<>&|-" and j - i < 3:
            j += 1
        if heredoc:
            strip_tabs = text.startswith("<<-", i)
            j = i + (3 if strip_tabs else 2)
        while j < n and text[j] in BLANKS:
            j += 1
        if j < n and text[j] not in _WORD_END:
            target, j = self.word(j, depth)
            if heredoc:
                self.pending_heredocs.append((target.text, strip_tabs))
        return max(j, i + 1)

    def heredoc_bodies(self, i: int) -> int:
        """i is just past a newline: skip the pending heredoc bodies, noting them opaque."""
        text, n = self.text, self.n
        for delimiter, strip_tabs in self.pending_heredocs:
            body_start = i
            while i < n:
                line_end = text.find("\n", i)
                line_end = n if line_end == -1 else line_end
                line = text[i:line_end].rstrip("\r")
                i = min(line_end + 1, n)
                if (line.lstrip("\t") if strip_tabs else line) == delimiter:
                    break
            self.layout.opaque.append((body_start, i))
        self.pending_heredocs = []
        return i

    def commands(self, i: int, depth: int = 0, stop_at_newline: bool = False) -> int:
        """Scan commands from i to the end of the text (depth 0) or to the `)` closing a `$(` (depth > 0,
        returning the offset after it). With stop_at_newline, stop at the end of the first command line."""
        text, n = self.text, self.n
        while i < n:
            ch = text[i]
            cont = _continuation(text, i)
            if cont:
                i += cont
            elif ch in BLANKS or ch == "\r":
                i += 1
            elif ch == "\n":
                i = self.heredoc_bodies(i + 1) if self.pending_heredocs else i + 1
                if stop_at_newline:
                    return i
            elif ch == "#":
                end = text.find("\n", i)
                end = n if end == -1 else end
                self.layout.comments.append((i, end))
                i = end
            elif ch == ")" and depth > 0:
                return i + 1
            elif ch in ";&|()":
                i += 1
            elif ch in "<>":
                i = self.redirection(i, depth)
            else:
                _, i = self.word(i, depth)
        return n


def layout(text: str) -> ScriptLayout:
    """Heredoc bodies, multi-line strings and comments of a whole script."""
    lexer = _Lexer(text)
    lexer.commands(0)
    lexer.layout.opaque.sort()
    lexer.layout.comments.sort()
    return lexer.layout


def command_words(text: str, start: int) -> Command:
    """The words of the simple command whose arguments start at `start` (just after the command name), up to
    an unquoted newline, `;`, `&`, `|`, `)` or a comment. Redirections and their targets are left out."""
    lexer = _Lexer(text)
    n = len(text)
    command = Command(end=start)
    i = start
    while i < n:
        ch = text[i]
        cont = _continuation(text, i)
        if cont:
            i += cont
        elif ch in BLANKS or (ch == "\r" and not text.startswith("\r\n", i)):
            i += 1
        elif ch in "\r\n;&|()#":
            if ch == "&" and text.startswith("&>", i):
                i = lexer.redirection(i, 0)
                continue
            break
        elif ch in "<>":
            i = lexer.redirection(i, 0)
        else:
            word, end = lexer.word(i)
            if end < n and text[end] in "<>" and word.text.isdigit() and word.literal:
                i = end  # `2>&1`: a file descriptor, not an argument
                continue
            command.words.append(word)
            command.end = end
            i = end
    return command
