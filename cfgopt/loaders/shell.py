"""A POSIX shell tokenizer: one pass over a whole script, yielding its simple commands as words with spans.

It understands what launch scripts use: blanks, `\\`-newline continuations, single and double quotes,
`$'...'`, `$(...)` (nested, including `$( (...) )` and `$(case x in a) ...;; esac)`), `$((...))` arithmetic
(parentheses counted, not parsed as commands), `${...}`, backticks, process substitution, comments,
redirections, heredocs (`<<EOF`, `<<-EOF`, `<<'EOF'`), array assignments and the control operators
(`;`, `&&`, `||`, `|`, `&`, `;;`, newlines, `(`, `)`). It does not run or expand anything: a word holding an
expansion is marked `literal=False`, because its value is known only when the script runs, and `spread=True`
when it could become any number of arguments (an unquoted expansion, `"$@"`). For words without expansions,
the values equal `shlex.split(posix=True)`'s (tests/loaders/test_shell_lexer.py checks this).

Every loop advances at least one character per iteration, nesting is capped (`MAX_NESTING`), and the text
is read once (an arithmetic `$((` that turns out to be a command substitution is read twice), so the scan is
linear in the length of the script on any input, including an unterminated quote or a backslash at the end.
"""

from __future__ import annotations

import bisect
import functools
import re

from cfgopt.text.record import Record
from cfgopt.text.user_text import is_integer

BLANKS = " \t"
# Characters that end an unquoted word. A lone CR is a blank here (bash would keep it in the word, but a
# script with CRLF line endings is read as the user sees it, as the rest of cfgopt does; what bash passes a launch
# there is `cfgopt.loaders.launch.line_endings`' to say, LF055).
_WORD_END = " \t\r\n;&|()<>"
MAX_NESTING = 64
_NAME_CHARS = "_@*#?$!-"
_ASSIGNMENT_HEAD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=")
_OPERATORS = (";;&", ";;", ";&", "&&", "||", "|&", ";", "&", "|")
_REDIRECTIONS = ("<<<", "<<-", "<<", "<>", "<&", "<", ">>", ">&", ">|", ">", "&>>", "&>")
_WRITES = frozenset({"<>", ">>", ">|", ">", "&>>", "&>"})  # the redirections that create their target file


class Word(Record):
    text: str  # the value after quote removal; expansions kept as written
    start: int
    end: int
    literal: bool = True  # no `$`, backtick or ANSI-C expansion: the value is known without running anything
    spread: bool = False  # an unquoted expansion or `"$@"`: it may become zero, one or several arguments
    expanded: bool = False  # literal only through variables whose value is known (`shell.expand`)


class Command(Record):
    """A simple command: its words (redirections left out), from its first word to the end of its last."""

    words: list[Word]
    start: int
    end: int  # offset just past the last character that belongs to the command
    depth: int = 0  # 0 at the top level, more inside `$(...)`, backticks excepted (they are not read)


class ScriptLayout:
    """Where a script's text is not shell code a tool may edit: heredoc bodies (they are data written
    somewhere else) and quoted strings that span lines; and where its comments are."""

    def __init__(self) -> None:
        self.opaque: list[tuple[int, int]] = []
        self.comments: list[tuple[int, int]] = []
        self.written: list[Word] = []  # the targets of output redirections (`> cfg.yaml`, `>> log`), in text order
        self.cases: list[tuple[int, int]] = []  # each `case ... esac`, from `case` to `esac` (its bodies run or not)
        self._reach: dict[int, list[int]] = {}

    def in_opaque(self, offset: int) -> bool:
        return _overlaps(self.opaque, self._reach_of(self.opaque), offset, offset + 1)

    def in_comment(self, offset: int) -> bool:
        return _overlaps(self.comments, self._reach_of(self.comments), offset, offset + 1)

    def overlaps_opaque(self, start: int, end: int) -> bool:
        return _overlaps(self.opaque, self._reach_of(self.opaque), start, max(end, start + 1))

    def _reach_of(self, regions: list[tuple[int, int]]) -> list[int]:
        """The furthest end of the (sorted) regions up to each one: non-decreasing, so bisectable. Regions
        may nest (a string inside a `$(...)` inside a longer string)."""
        reach = self._reach.get(id(regions))
        if reach is None or len(reach) != len(regions):
            reach, furthest = [], -1
            for _, e in regions:
                furthest = max(furthest, e)
                reach.append(furthest)
            self._reach[id(regions)] = reach
        return reach


def _overlaps(regions: list[tuple[int, int]], reach: list[int], start: int, end: int) -> bool:
    """Does [start, end) overlap one of the sorted regions? Those starting before `end` are a prefix; one of
    them overlaps exactly when the furthest end among them lies past `start`."""
    i = bisect.bisect_left(regions, (end, -1))
    return i > 0 and reach[i - 1] > start


class Script(Record):
    commands: list[Command]  # every simple command, in the order they start
    layout: ScriptLayout


def _continuation(text: str, i: int) -> int:
    """Length of a `\\`-newline at i (0 if there is none)."""
    if text[i] != "\\":
        return 0
    if text.startswith("\\\n", i):
        return 2
    if text.startswith("\\\r\n", i):
        return 3
    return 0


def _simple_expansion(text: str, i: int) -> bool:
    """Is the `$` at i a parameter expansion (`$X`, `$1`, `$@`)?"""
    return i + 1 < len(text) and (text[i + 1].isalnum() or text[i + 1] in _NAME_CHARS)


class _Lexer:
    def __init__(self, text: str) -> None:
        self.text = text
        self.n = len(text)
        self.layout = ScriptLayout()
        self.commands: list[Command] = []
        self.pending_heredocs: list[tuple[str, bool]] = []  # (delimiter, strip leading tabs)
        self.stop_after_first = False
        self.stopped = False

    # ------------------------------------------------------------------ words
    def word(self, i: int, depth: int) -> tuple[Word, int]:
        """The word starting at i (i is not a blank or an operator)."""
        text, n = self.text, self.n
        out: list[str] = []
        literal, spread = True, False
        start = i
        while i < n:
            ch = text[i]
            cont = _continuation(text, i)
            if cont:
                i += cont
            elif ch in _WORD_END:
                if ch == "(" and depth < MAX_NESTING and _ASSIGNMENT_HEAD.fullmatch("".join(out)):  # `ARR=(a b c)`
                    end = self._array(i, depth)
                    out.append(text[i:end])
                    literal, i = False, end
                    continue
                break
            elif ch == "\\":
                out.append(text[i + 1] if i + 1 < n else "\\")  # a backslash at the end of the file is kept
                i += 2
            elif ch == "'":
                close = text.find("'", i + 1)
                close = n if close == -1 else close
                out.append(text[i + 1 : close])
                self._note_string(i, close)
                i = close + 1
            elif ch == '"' or (ch == "$" and text.startswith('$"', i)):  # `$"..."`: bash's locale string
                value, i, lit, spr = self._double_quoted(i + (ch == "$"), depth)
                out.append(value)
                literal, spread = literal and lit, spread or spr
            elif ch == "$" and i + 1 < n and text[i + 1] in "'({":
                end = self._dollar(i, depth)
                out.append(text[i:end])
                literal = False
                spread = spread or (not text.startswith("$((", i) and text[i + 1] != "'")
                i = end
            elif ch == "`":
                end = self._backtick(i)
                out.append(text[i:end])
                literal, spread, i = False, True, end
            else:
                if ch == "$" and _simple_expansion(text, i):
                    literal, spread = False, True
                out.append(ch)
                i += 1
        return Word("".join(out), start, min(i, n), literal, spread), min(i, n)

    def _array(self, i: int, depth: int) -> int:
        """Skip the `(a b c)` of an array assignment at i (the word goes on after it)."""
        text, n = self.text, self.n
        i += 1
        while i < n and text[i] != ")":
            if text[i] in BLANKS or text[i] in "\r\n" or _continuation(text, i):
                i += _continuation(text, i) or 1
            elif text[i] == "#":
                i = self._comment(i)
            elif text[i] in _WORD_END:
                i += 1
            else:
                i = self.word(i, depth + 1)[1]
        return min(i + 1, n)

    def _note_string(self, open_at: int, close_at: int) -> None:
        if "\n" in self.text[open_at:close_at]:
            self.layout.opaque.append((open_at, min(close_at + 1, self.n)))

    def _double_quoted(self, i: int, depth: int) -> tuple[str, int, bool, bool]:
        """The value of the string at i, the offset after it, whether it is literal and whether it spreads."""
        text, n = self.text, self.n
        out: list[str] = []
        literal, spread = True, False
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
            elif (ch == "$" and j + 1 < n and text[j + 1] in "({") or ch == "`":
                end = self._dollar(j, depth) if ch == "$" else self._backtick(j)
                spread = spread or (text.startswith("${", j) and "[@]" in text[j:end]) or text.startswith("${@", j)
                out.append(text[j:end])
                literal = False
                j = end
            else:
                if ch == "$" and _simple_expansion(text, j):
                    literal = False
                    spread = spread or text[j + 1] == "@"
                out.append(ch)
                j += 1
        self._note_string(i, j)
        return "".join(out), min(j + 1, n), literal, spread

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
            return self._braces(i + 2)
        if text.startswith("((", i + 1):
            end = self._arithmetic(i + 3)
            if end is not None:
                return end
        if depth >= MAX_NESTING:
            return n
        return self.sequence(i + 2, depth + 1)  # $( ... ): the commands inside, up to the matching `)`

    def _braces(self, j: int) -> int:
        """End of a `${...}` whose body starts at j."""
        text, n = self.text, self.n
        level = 1
        while j < n and level:
            skipped = self._past_escape_or_quote(j)
            if skipped is not None:
                j = skipped
                continue
            level += 1 if text[j] == "{" else -1 if text[j] == "}" else 0
            j += 1
        return min(j, n)

    def _past_escape_or_quote(self, j: int) -> int | None:
        """Past a backslash escape or a quoted string at j (None: neither), as bracket counting skips them."""
        ch = self.text[j]
        if ch == "\\":
            return j + 2
        if ch in "'\"":
            close = self.text.find(ch, j + 1)
            return self.n if close == -1 else close + 1
        return None

    def _arithmetic(self, j: int) -> int | None:
        """End of a `$((...))` or `((...))` whose body starts at j, counting parentheses; None when the
        parenthesis closing the inner one is not followed by `)` at once: then it was `$( (...) )`."""
        text, n = self.text, self.n
        level = 2
        while j < n:
            skipped = self._past_escape_or_quote(j)
            if skipped is not None:
                j = skipped
                continue
            ch = text[j]
            if ch == "(":
                level += 1
            elif ch == ")":
                level -= 1
                if level == 1:
                    return j + 2 if text.startswith(")", j + 1) else None
            j += 1
        return n

    def _backtick(self, i: int) -> int:
        text, n = self.text, self.n
        j = i + 1
        while j < n and text[j] != "`":
            j += 2 if text[j] == "\\" else 1
        return min(j + 1, n)

    def _comment(self, i: int) -> int:
        end = self.text.find("\n", i)
        end = self.n if end == -1 else end
        self.layout.comments.append((i, end))
        return end

    # ------------------------------------------------------------------ redirections and heredocs
    def redirection(self, i: int, depth: int) -> int:
        """Skip a redirection operator at i and its target word; note a heredoc."""
        text, n = self.text, self.n
        op = next((op for op in _REDIRECTIONS if text.startswith(op, i)), text[i])
        j = i + len(op)
        while j < n and (text[j] in BLANKS or _continuation(text, j)):
            j += _continuation(text, j) or 1
        if text.startswith(("<(", ">("), j):  # `> >(tee log)`: the target is a process substitution
            j = self.sequence(j + 2, depth + 1) if depth < MAX_NESTING else n
        elif j < n and text[j] not in _WORD_END:
            target, j = self.word(j, depth)
            if op in ("<<", "<<-"):
                self.pending_heredocs.append((target.text, op == "<<-"))
            elif op in _WRITES:
                self.layout.written.append(target)
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

    # ------------------------------------------------------------------ commands
    def sequence(self, i: int, depth: int) -> int:
        """Read commands from i to the end of the text (depth 0) or to the `)` closing a `$(` (depth > 0,
        returning the offset after it)."""
        state = _Sequence(self, depth)
        text, n = self.text, self.n
        while i < n and not self.stopped:
            ch = text[i]
            if ch in BLANKS or ch == "\r":
                i += 1
            elif _continuation(text, i):
                i += _continuation(text, i)
            elif ch == "\n":
                state.finish()
                i = self.heredoc_bodies(i + 1) if self.pending_heredocs else i + 1
            elif ch == "#":
                i = self._comment(i)
            elif ch in ";&|" and not text.startswith("&>", i):
                op = next(op for op in _OPERATORS if text.startswith(op, i))
                state.operator(op)
                i += len(op)
            elif ch == "(":
                i = state.open_paren(i)
            elif ch == ")":
                if state.close_paren():
                    return i + 1
                i += 1
            elif ch in "<>&" and not text.startswith(("<(", ">("), i):
                i = self.redirection(i, depth)
            else:
                i = state.word(i)
        state.finish()
        return n


class _Sequence:
    """The commands of one level (the script, or the inside of one `$(...)`): the words of the command being
    read, open subshell parentheses, and where a `case` is (its patterns end with an unbalanced `)`)."""

    def __init__(self, lexer: _Lexer, depth: int) -> None:
        self.lexer, self.depth = lexer, depth
        self.words: list[Word] = []
        self.parens = 0
        self.cases: list[str] = []  # per open `case`: "header" (before `in`), "pattern" or "body"
        self.case_starts: list[int] = []  # where each open `case` starts

    def finish(self) -> None:
        if self.words:
            words = self.words
            self.lexer.commands.append(Command(words, words[0].start, words[-1].end, self.depth))
            self.words = []
            if self.lexer.stop_after_first and self.depth == 0:
                self.lexer.stopped = True

    def operator(self, op: str) -> None:
        self.finish()
        if (op.startswith(";;") or op == ";&") and self.cases and self.cases[-1] == "body":
            self.cases[-1] = "pattern"

    def open_paren(self, i: int) -> int:
        text = self.lexer.text
        if self.cases and self.cases[-1] == "pattern":
            return i + 1  # `(a) ...` : the optional parenthesis before a pattern
        if not self.words and text.startswith("((", i):
            end = self.lexer._arithmetic(i + 2)  # an arithmetic command `(( i++ ))`
            if end is not None:
                return end
        if self.words and self.words[0].text == "for" and text.startswith("((", i):
            return self.lexer._arithmetic(i + 2) or i + 1  # `for ((i = 0; i < 3; i++))`
        self.finish()
        self.parens += 1
        return i + 1

    def close_paren(self) -> bool:
        """A `)`: the end of a case pattern, of a subshell, or (returning True) of the enclosing `$(`."""
        if self.cases and self.cases[-1] == "pattern":
            self.words = []
            self.cases[-1] = "body"
            return False
        self.finish()
        if self.parens == 0:
            return self.depth > 0
        self.parens -= 1
        return False

    def word(self, i: int) -> int:
        lexer = self.lexer
        text, n = lexer.text, lexer.n
        if text.startswith(("<(", ">("), i):  # process substitution: a computed word
            end = lexer.sequence(i + 2, self.depth + 1) if self.depth < MAX_NESTING else n
            self.words.append(Word(text[i:end], i, end, False, True))
            return end
        word, end = lexer.word(i, self.depth)
        if end < n and text[end] in "<>" and word.literal and (is_integer(word.text) or _is_fd_name(word.text)):
            return end  # `2>&1`, `{fd}>file`: a file descriptor, not an argument
        if self._case_word(word):
            return max(end, i + 1)
        self.words.append(word)
        return max(end, i + 1)

    def _case_word(self, word: Word) -> bool:
        """Follow `case WORD in PATTERN) ... ;; esac`; True when the word belongs to the case syntax."""
        state = self.cases[-1] if self.cases else None
        if state == "header":
            if word.text == "in" and word.literal:
                self.cases[-1] = "pattern"
            return True
        if state == "pattern":
            if word.text == "esac" and word.literal:
                self._end_case(word)
            return True
        if not self.words and word.literal and word.text == "case":
            self.cases.append("header")
            self.case_starts.append(word.start)
            return True
        if not self.words and state == "body" and word.literal and word.text == "esac":
            self._end_case(word)
            return True
        return False

    def _end_case(self, esac: Word) -> None:
        self.cases.pop()
        self.lexer.layout.cases.append((self.case_starts.pop(), esac.end))


def _is_fd_name(text: str) -> bool:
    return len(text) > 2 and text[0] == "{" and text[-1] == "}" and text[1:-1].isidentifier()


@functools.lru_cache(maxsize=8)
def scan(text: str) -> Script:
    """Every simple command of a script, its heredoc bodies, multi-line strings and comments. Cached: the
    fixer reads the same text several times (lint, damage check); callers must not change the result."""
    lexer = _Lexer(text)
    lexer.sequence(0, 0)
    lexer.layout.opaque.sort()
    lexer.layout.comments.sort()
    lexer.commands.sort(key=lambda c: (c.start, c.depth))
    return Script(lexer.commands, lexer.layout)


def layout(text: str) -> ScriptLayout:
    """Heredoc bodies, multi-line strings and comments of a whole script."""
    return scan(text).layout


def command_words(text: str, start: int) -> Command:
    """The first simple command from `start` (typically its arguments, just after the command name), up to an
    unquoted newline, `;`, `&`, `|`, `)` or a comment. Redirections and their targets are left out."""
    lexer = _Lexer(text)
    lexer.stop_after_first = True
    lexer.sequence(start, 0)
    outer = [c for c in lexer.commands if c.depth == 0]
    return outer[0] if outer else Command([], start, start)


# ---------------------------------------------------------------------------------------------- static expansion
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SPLIT_OR_GLOB = frozenset(" \t\n*?[")
# The longest value an expansion is followed to: `A=$A$A` doubles a value per line, so 40 such lines would
# build a terabyte; a longer value is known only at run time (a launch's arguments are far shorter).
MAX_EXPANDED = 16384


def static_word(word: Word) -> bool:
    """Is the word's value written in it, with no expansion (not even of a variable whose value is known)? Only
    such a value may be rewritten by a fix: writing a literal over `$LR` would drop the variable."""
    return word.literal and not word.expanded


class _Unknown(Exception):
    """An expansion whose value is known only when the script runs."""


def expand(text: str, word: Word, variables: dict[str, str | None], assignment: bool = False) -> Word:
    """The word as bash expands it where every expansion in it is `$NAME` or `${NAME}` of a variable whose value
    is known (`variables`: name -> value, None for a value known only at run time); else the word unchanged.

    `text` is the script: the word is read again from its own characters (quotes, escapes, continuation lines).
    An unquoted value that bash would split or glob (blanks, `*`) is unknown too, except in an assignment
    (`A=$B`), which bash neither splits nor globs. `$1`, `$@`, `$(...)`, `${X:-a}`, backticks: unknown."""
    if word.literal:
        return word
    try:
        value = _Expansion(text[word.start : word.end], variables, assignment).read()
    except _Unknown:
        return word
    return Word(value, word.start, word.end, True, False, True)


class _Expansion:
    def __init__(self, src: str, variables: dict[str, str | None], assignment: bool) -> None:
        self.src, self.variables, self.assignment = src, variables, assignment
        self.out: list[str] = []
        self.size = len(src)  # the value's length so far, bounded by MAX_EXPANDED

    def read(self) -> str:
        src, i, n = self.src, 0, len(self.src)
        while i < n:
            ch = src[i]
            if ch == "\\":
                cont = _continuation(src, i)
                if not cont:
                    self.out.append(src[i + 1] if i + 1 < n else "\\")
                i += cont or 2
            elif ch == "'":
                close = src.find("'", i + 1)
                if close == -1:
                    raise _Unknown
                self.out.append(src[i + 1 : close])
                i = close + 1
            elif ch == '"' or src.startswith('$"', i):
                i = self._double_quoted(i + 1 + (ch == "$"))
            elif ch == "$":
                i = self._parameter(i, quoted=False)
            elif ch == "`":
                raise _Unknown
            else:
                self.out.append(ch)
                i += 1
        return "".join(self.out)

    def _double_quoted(self, i: int) -> int:
        src, n = self.src, len(self.src)
        while i < n and src[i] != '"':
            ch = src[i]
            if ch == "\\" and i + 1 < n:
                if src[i + 1] != "\n":
                    self.out.append(src[i + 1] if src[i + 1] in '$`"\\' else src[i : i + 2])
                i += 2
            elif ch == "$":
                i = self._parameter(i, quoted=True)
            elif ch == "`":
                raise _Unknown
            else:
                self.out.append(ch)
                i += 1
        if i >= n:
            raise _Unknown
        return i + 1

    def _parameter(self, i: int, quoted: bool) -> int:
        """`$NAME` or `${NAME}` at i: its value; a `$` that starts no expansion is itself."""
        src = self.src
        braced = src.startswith("${", i)
        match = _NAME.match(src, i + 1 + braced)
        if match is None or (braced and not src.startswith("}", match.end())):
            if braced or _simple_expansion(src, i) or src.startswith(("$(", "$'"), i):
                raise _Unknown  # `$1`, `$@`, `${X:-a}`, `$(...)`
            self.out.append("$")
            return i + 1
        value = self.variables.get(match.group())
        self.size += len(value or "")
        if self.size > MAX_EXPANDED:
            raise _Unknown
        if value is None or (not quoted and not self.assignment and (not value or _SPLIT_OR_GLOB & set(value))):
            raise _Unknown
        self.out.append(value)
        return match.end() + braced


def locate(text: str, word: Word, index: int) -> tuple[int, str] | None:
    """Where the `index`-th character of a literal word's value is written in `text`, and the quote it is written
    inside ("", "'" or '"'); None when it cannot be told (`$'...'`, an expansion). An edit that replaces the text
    on one side of that offset keeps the word whole by closing or reopening that quote (`cfgopt.loaders.edits`)."""
    src = text[word.start : word.end]
    i, n, seen, quote = 0, len(src), 0, ""
    while i < n:
        ch = src[i]
        if quote == "'":
            if ch == "'":
                quote, i = "", i + 1
                continue
        elif quote == '"':
            if ch == '"':
                quote, i = "", i + 1
                continue
            if ch == "\\" and i + 1 < n and src[i + 1] in '$`"\\\n':
                if src[i + 1] == "\n":
                    i += 2
                    continue
                i += 1  # the escaped character is the value's
        else:
            cont = _continuation(src, i)
            if cont:
                i += cont
                continue
            if ch in "'\"" or src.startswith('$"', i):
                quote, i = ('"', i + 2) if ch == "$" else (ch, i + 1)
                continue
            if ch == "$" or ch == "`":
                return None
            if ch == "\\":
                if seen == index:
                    return word.start + i, ""
                i += 1
        if seen == index:
            return word.start + i, quote
        seen, i = seen + 1, i + 1
    return None
