"""The script's commands read in the order they run (`find_commands`, `_Reader`): top to bottom, a function's body
at each call, the environment followed, each launch's `Source` built where it stands.
"""

from __future__ import annotations

from cfgopt.loaders import shell
from cfgopt.loaders.launch.cut_off import cut_off_arguments
from cfgopt.loaders.launch.environment import ScriptEnvironment
from cfgopt.loaders.launch.functions import function_bodies, local_names
from cfgopt.loaders.launch.line_endings import carriage_return
from cfgopt.loaders.launch.options import word_set
from cfgopt.loaders.launch.prefixes import ASSIGNMENT, program_name
from cfgopt.loaders.launch.shapes import launch_of
from cfgopt.loaders.launch.source import launch_source
from cfgopt.loaders.shell import Word
from cfgopt.text.document import Document
from cfgopt.text.source import Source

TYPE_CHECKING = False
if TYPE_CHECKING:
    from cfgopt.knowledge.schema import LlamaFactorySchema


def find_commands(doc: Document, lf: LlamaFactorySchema | None = None) -> list[Source]:
    """One source per LLaMA-Factory launch (`llamafactory-cli train --key value ...`, `torchrun src/train.py
    ...`) in the script, in the order they appear. The body of a shell function the script calls is read at each
    call, as bash runs it (its assignments apply from there; a launch in it sees the variables of its first
    call); a function never called is read where it is written."""
    from cfgopt.knowledge import schema

    script = shell.scan(doc.text)
    reader = _Reader(doc, lf or schema.llamafactory(), script.commands)
    reader.run(0, len(script.commands))
    return sorted(reader.sources.values(), key=lambda s: s.command["start"])


# Commands that may create a file named among their arguments: a launch of a YAML one of them names is not judged
# missing (the file exists by the time the launch runs).
_WRITERS = word_set("cp mv ln install rsync scp tee wget curl sed awk yq jq envsubst python python3 touch dd truncate")
_CONTROL = {"if": 1, "while": 1, "until": 1, "for": 1, "select": 1, "fi": -1, "done": -1}
_CONTROL.update(dict.fromkeys(("then", "else", "elif", "do", "!", "{"), 0))
# Commands read through calls, per command of the script: `f1() { f0; f0; }`, `f2() { f1; f1; }` ... doubles
# the work per level, so past this budget a call's assignments become values known only at run time.
CALL_BUDGET = 32


class _Reader:
    """The script's commands in the order they run where the text tells it: top to bottom, with a function's
    body read at each call of it."""

    def __init__(self, doc: Document, lf: LlamaFactorySchema, commands: list[shell.Command]) -> None:
        self.doc, self.lf, self.commands = doc, lf, commands
        self.environment = ScriptEnvironment(doc.text)
        self.sources: dict[int, Source] = {}  # by the index of the launch's command
        self.functions, self.headers = function_bodies(doc.text, commands)
        called = {program_name(c.words) for i, c in enumerate(commands) if c.depth == 0 and i not in self.headers}
        # the commands of the bodies of called functions: read at the calls, not where they are written
        self.deferred = {i for name, (a, b) in self.functions.items() if name in called for i in range(a, b)}
        self.budget = CALL_BUDGET * len(commands) + 1000
        self.stack: list[str] = []
        self.redirected = shell.scan(doc.text).layout.written
        self.written: list[str] = []  # the files the commands read so far may have written (`cat > cfg.yaml`)
        self.position = 0  # where the top-level command being read starts
        self.level = 0  # the branches and loops open around the command being read
        self.conditional_calls = 0  # calls being read that may not run (`[ -n "$X" ] && setup`)
        self.cases = shell.scan(doc.text).layout.cases

    def run(self, start: int, end: int) -> None:
        covered = 0  # the end of the last launch read: a command before it is inside one of its words
        top = not self.stack
        for i in range(start, end):
            command = self.commands[i]
            if command.start < covered or (top and i in self.deferred) or i in self.headers:
                continue
            self.budget -= 1
            self.position = command.start if top else self.position
            opened = self._nesting(command)
            conditional = self.level > 0 or self.conditional_calls > 0 or self._guarded(command)
            self.level += opened
            words = self.environment.expanded(command.words)
            launch = launch_of(words)
            if launch is not None:
                covered = command.end
                if i not in self.sources:
                    self.sources[i] = launch_source(self.doc, launch, self.environment, self.lf)
                    self.sources[i].command["written"] = self._written_before()
                    self.sources[i].command["cut_off"] = cut_off_arguments(self.doc.text, self.commands, i)
                    if "\r" in self.doc.text:  # a CRLF script: what bash passes the launch (LF055)
                        self.sources[i].command["carriage_return"] = carriage_return(
                            self.doc, launch, command, self.environment, self.lf, self.sources[i]
                        )
            else:
                if program_name(words) in _WRITERS:
                    self.written.extend(w.text for w in words if w.literal)
                if command.depth == 0 and not self._call(command.words, conditional):
                    self.environment.read(command.words, conditional)

    def _nesting(self, command: shell.Command) -> int:
        """How the command changes the nesting of branches and loops: +1 per `if` / `while` / `until` / `for` /
        `select` it opens, -1 per `fi` / `done` that closes one (a body inside may not run, or run again)."""
        if command.depth:
            return 0
        change = 0
        for word in command.words:
            if not word.literal or word.text not in _CONTROL:
                break
            change += _CONTROL[word.text]
            if word.text in ("for", "select"):
                break
        if change < 0:
            self.level = max(0, self.level + change)
            return 0
        return change

    def _guarded(self, command: shell.Command) -> bool:
        """Does the command run only as the other side of `&&` / `||`, in a pipeline (a subshell) or a `case`?"""
        text, i = self.doc.text, command.start
        while i > 0 and text[i - 1] in " \t\r\n\\":  # back over blanks and continuations only: linear in all
            i -= 1
        if text.endswith(("&&", "||", "|"), 0, i) or (command.depth == 0 and text.endswith("(", 0, i)):
            return True
        return any(start < command.start < end for start, end in self.cases)

    def _written_before(self) -> list[str]:
        """The paths the script may have written before this launch: its output redirections so far (`cat >
        cfg.yaml <<EOF`, `sed ... > cfg.yaml`) and the arguments of the commands that write files (`cp`, `tee`)."""
        static = self.environment.static
        targets = (w for w in self.redirected if w.start < self.position)
        redirected = [shell.expand(self.doc.text, w, static) for w in targets]
        return self.written + [w.text for w in redirected if w.literal]

    def _call(self, words: list[Word], conditional: bool = False) -> bool:
        """A call of a function the script defines: its body read now; its `local` names get their values back."""
        name = program_name(words)
        body = self.functions.get(name)
        if body is None:
            return False
        self.conditional_calls += conditional
        before = dict(self.environment.static)
        if self.budget <= 0 or name in self.stack:  # recursion, or past the budget: what any function sets is unknown
            for command in (self.commands[i] for a, b in self.functions.values() for i in range(a, b)):
                for word in command.words:
                    if ASSIGNMENT.match(word.text):
                        self.environment.static[word.text.partition("=")[0].rstrip("+")] = None
            self.conditional_calls -= conditional
            return True
        self.stack.append(name)
        self.run(*body)
        self.stack.pop()
        self.conditional_calls -= conditional
        for local in local_names(self.commands[body[0] : body[1]]):
            if local in before:
                self.environment.static[local] = before[local]
            else:
                self.environment.static.pop(local, None)
        return True
