"""The environment of a script as it runs, top to bottom (`ScriptEnvironment`): each shell variable's static value,
each array's elements, the tracked launcher variables exported (`TRACKED_ENV`: the visible-devices lists,
`NPROC_PER_NODE`, `NNODES`, `FORCE_TORCHRUN`), and a command's words with them expanded as bash expands them.
"""

from __future__ import annotations

import re

from cfgopt.loaders import shell
from cfgopt.loaders.launch.prefixes import ASSIGNMENT, VARIABLE_NAME, skip_prefixes
from cfgopt.loaders.shell import Word

# Environment variables a launch reads that cfgopt keeps track of through a script (`export` and prefixes).
VISIBLE_DEVICES = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "ASCEND_RT_VISIBLE_DEVICES")
TRACKED_ENV = frozenset({*VISIBLE_DEVICES, "NPROC_PER_NODE", "NNODES", "FORCE_TORCHRUN"})


class ScriptEnvironment:
    """What the script has set so far, in the order it runs where the text tells it: every shell variable's value
    where it is static (`YAML=configs/x.yaml`, `OUT=${BASE}/out`, `OPTS+=" --bf16"`), each array's elements
    (`ARGS=(--bf16 --template qwen)`, `ARGS+=(...)`), or None where it is known only at run time (`template=$1`,
    `N=$(nproc)`, a `for` or `read` variable, a value set in a branch, a loop or after `&&` that differs from the
    one before), and the tracked variables exported (`export A=1`)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.static: dict[str, str | None] = {}
        self.arrays: dict[str, list[str] | None] = {}
        self.variables: dict[str, Word | None] = {}
        self.exported: dict[str, Word | None] = {}

    def expanded(self, words: list[Word]) -> list[Word]:
        """The words with the variables of static value expanded (`"${YAML}"` -> `configs/x.yaml`), an unquoted
        `$OPTS` split into its words and `"${ARGS[@]}"` into its elements, as bash expands them; a word holding any
        other expansion stays as it is (not literal: unknown)."""
        if all(w.literal for w in words):
            return words
        out: list[Word] = []
        for word in words:
            spread = self._spread(word) if not word.literal else None
            if spread is not None:
                out.extend(Word(value, word.start, word.end, True, False, True) for value in spread)
            else:
                out.append(shell.expand(self.text, word, self.static))
        return out

    def _spread(self, word: Word) -> list[str] | None:
        """The words an unquoted `$NAME` / `${NAME}` of a known value, or a `"${NAME[@]}"` of a known array,
        becomes (bash's word splitting on blanks; a value bash would glob stays unknown); None: not such a word."""
        match = _WHOLE_EXPANSION.fullmatch(self.text[word.start : word.end])
        if match is None:
            return None
        name = match.group("plain") or match.group("braced")
        array, quoted = match.group("all") is not None, match.group("q") is not None
        if array:
            elements = self.arrays.get(name)
            if elements is None or (not quoted and any(_GLOB & set(e) or not e.strip() for e in elements)):
                return None
            return elements if quoted else [part for e in elements for part in e.split()]
        value = self.static.get(name)
        if quoted or value is None or _GLOB & set(value):
            return None
        return value.split()

    def read(self, words: list[Word], conditional: bool = False) -> None:
        """Follow one command that is not a launch: `A=1`, `export A=1 B`, `local A=$1`, `unset A`, `for A in`,
        `read A` (after `then`, `do` ...). `conditional`: the command may not run (a branch, a loop, after `&&`)."""
        for word in words:
            indexed = _INDEXED_ASSIGNMENT.match(word.text)
            if indexed:  # `ARGS[2]=x`: the array changes where cfgopt does not follow it
                self.arrays[indexed.group(1)] = None
        assignments: dict[str, Word] = {}
        k = skip_prefixes(words, 0, assignments)
        words = words[k:]
        if not words:
            for word in assignments.values():
                self._assign(word, export=False, conditional=conditional)
            return
        head = words[0].text if words[0].literal else ""
        if head in ("export", "declare", "typeset", "local", "readonly"):
            exporting = head == "export" or any(w.text.startswith("-") and "x" in w.text for w in words)
            for word in words[1:]:
                if ASSIGNMENT.match(word.text):
                    self._assign(word, export=exporting, conditional=conditional)
                elif exporting and word.text in TRACKED_ENV:
                    self.exported[word.text] = self.variables.get(word.text)
        elif head == "unset":
            for word in words[1:]:
                for table in (self.static, self.arrays, self.variables, self.exported):
                    table.pop(word.text, None)
        elif head in ("for", "select") and len(words) > 1:
            self.static[words[1].text] = None
        elif head in ("read", "mapfile", "readarray", "getopts"):
            for word in words[1:]:
                if VARIABLE_NAME.fullmatch(word.text):
                    self.static[word.text] = None
                    self.arrays[word.text] = None

    def _assign(self, word: Word, export: bool, conditional: bool = False) -> None:
        raw = self.text[word.start : word.end]
        array = _ARRAY_ASSIGNMENT.fullmatch(raw)
        if array is not None:
            self._assign_array(array.group(1), array.group(2) == "+", array.group(3), conditional)
            return
        word = shell.expand(self.text, word, self.static, assignment=True)
        name, _, value = word.text.partition("=")
        appended = name.endswith("+")
        name = name.rstrip("+")
        known: str | None = value if word.literal else None
        if appended:  # `OPTS+=" --bf16"`: after the value it had, where that is known
            before = self.static.get(name)
            known = before + known if before is not None and known is not None else None
        if conditional and known != self.static.get(name, known if not appended else None):
            known = None  # set or not, as the script runs: either value
        self.static[name] = known
        self.arrays.pop(name, None)
        if name in TRACKED_ENV:
            unchanged = name not in self.variables or getattr(self.variables[name], "text", None) == word.text
            self.variables[name] = word if not conditional or unchanged else None
            if export or name in self.exported:
                self.exported[name] = self.variables[name]

    def _assign_array(self, name: str, appended: bool, body: str, conditional: bool) -> None:
        """`NAME=(a b c)` / `NAME+=(d)`: the elements where every one is known."""
        elements: list[str] | None = []
        for command in shell.scan(body).commands:
            for element in command.words:
                value = shell.expand(body, element, self.static)
                if not value.literal or elements is None:
                    elements = None
                    break
                elements.append(value.text)
        if appended:
            before = self.arrays.get(name)
            elements = before + elements if before is not None and elements is not None else None
        if conditional and elements != self.arrays.get(name):
            elements = None
        self.arrays[name] = elements
        self.static[name] = None  # `$NAME` is its first element: not followed


# A word that is one expansion of a variable (`$OPTS`, `${OPTS}`) or of all of an array's elements (`"${ARGS[@]}"`)
_WHOLE_EXPANSION = re.compile(
    r'(?P<q>")?\$(?:(?P<plain>[A-Za-z_][A-Za-z0-9_]*)|\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?P<all>\[@\])?\})(?(q)")'
)
_GLOB = frozenset("*?[")
_ARRAY_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(\+?)=\((.*)\)", re.DOTALL)
_INDEXED_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\[[^\]]*\]\+?=")
