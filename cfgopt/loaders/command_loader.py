"""LLaMA-Factory launches inside shell scripts, read the way LLaMA-Factory reads `sys.argv`.

How cfgopt reports a command line (documented in docs/command-lines.md): every launch of LLaMA-Factory's
training in a `.sh`/`.bash` file becomes one source whose entries are its `--key value` arguments, spans on
the tokens. The script is read once by the shell tokenizer (`cfgopt.loaders.shell.scan`); each simple command
is stripped of what runs it without being it (`nohup`, `time`, `env A=1`, `do`, `VAR=value` ...) and matched
against the launch shapes: `llamafactory-cli train`, `python src/train.py`, `python -m llamafactory.cli train`,
`deepspeed`/`torchrun`/`accelerate launch` of LLaMA-Factory's entry points. The launcher's own options are
not LLaMA-Factory's, and only the GPU count they imply is kept (`command["launcher_gpus"]`).
Without a YAML, LLaMA-Factory hands the arguments to `HfArgumentParser`, whose argparse rejects an invalid
choice or a non-boolean at once (exit 2); the rules report exactly that. With a YAML
(`llamafactory-cli train cfg.yaml key=value`), the YAML is linted as its own file.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, NamedTuple

from cfgopt.knowledge.targets import MAX_GPUS
from cfgopt.loaders import overrides, shell
from cfgopt.loaders.shell import Word
from cfgopt.text.document import Document
from cfgopt.text.source import Argument, Entry, Kind, Node, Source
from cfgopt.text.user_files import read_text_bounded
from cfgopt.text.user_text import integer

if TYPE_CHECKING:
    from cfgopt.knowledge.schema import LlamaFactorySchema

_SUBCOMMAND_GROUP = {
    "train": "train",
    "chat": "infer",
    "export": "infer",
    "api": "infer",
    "webchat": "infer",
    "eval": "eval",
}
CONFIG_SUFFIXES = (".yaml", ".yml", ".json")
_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\+?=")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PYTHON = re.compile(r"python(\d+(\.\d+)?)?")
# Environment variables a launch reads that cfgopt keeps track of through a script (`export` and prefixes).
VISIBLE_DEVICES = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "ASCEND_RT_VISIBLE_DEVICES")
TRACKED_ENV = frozenset({*VISIBLE_DEVICES, "NPROC_PER_NODE", "NNODES", "FORCE_TORCHRUN"})


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# The options of each launcher that take no value (from their argparse parsers: torch 2.x `torchrun`,
# deepspeed 0.19 `deepspeed`, accelerate 1.11 `accelerate launch`, a few of older releases); every other option
# takes one, unless a Python script follows it at once (a flag of a release not listed here).
_FLAGS = {
    "torchrun": _words(
        "-h --help -m --module --no-python --no_python --run-path --run_path --standalone --virtual-local-rank "
        "--virtual_local_rank --use_env --use-env"  # the last two: python -m torch.distributed.launch
    ),
    "deepspeed": _words(
        "-h --help -q --quiet --bind_cores_to_rank --force_multi --module --no_local_rank --no_python --no_ssh "
        "--no_ssh_check --save_pid --elastic_training"
    ),
    "accelerate": _words(
        "-h --help -m -q --quiet --cpu --debug --module --multi-gpu --multi_gpu --no-python --no_python --tpu "
        "--use-deepspeed --use_deepspeed --use-fsdp --use_fsdp --use-megatron-lm --use_megatron_lm --use-xpu "
        "--use_xpu --downcast-bf16 --downcast_bf16 --same-network --same_network --enable-cpu-affinity "
        "--enable_cpu_affinity --no-tpu-cluster --no_tpu_cluster --tpu-cluster --tpu_cluster --tpu-use-sudo "
        "--tpu_use_sudo --use-parallelism-config --use_parallelism_config --dynamo-use-dynamic "
        "--dynamo_use_dynamic --dynamo-use-fullgraph --dynamo_use_fullgraph --dynamo-use-regional-compilation "
        "--dynamo_use_regional_compilation --fp8-use-autocast-during-eval --fp8_use_autocast_during_eval"
    ),
    "python": _words("-b -B -d -E -i -I -O -OO -P -q -s -S -u -v -V -x"),
}
# Keys only LLaMA-Factory's arguments have: a `src/train.py` of another project is not LLaMA-Factory's.
_SIGNATURE_KEYS = ("--stage", "--finetuning_type", "--template")


class Launch(NamedTuple):
    """One launch of LLaMA-Factory found in a script."""

    name: Word  # the word that names what runs (`llamafactory-cli`, `deepspeed`, `python`, ...)
    kind: str  # what reads the options before LLaMA-Factory's: "cli", "python", "deepspeed", "torchrun", "accelerate"
    launcher: str  # how it is launched, as the docs name it
    subcommand: str  # `train`, `chat`, ...: LLaMA-Factory's subcommand (`train` for the training scripts)
    subcommand_word: Word | None
    args: list[Word]  # LLaMA-Factory's arguments
    options: dict[str, Word]  # the launcher's options (name -> value word; a flag's value is its own word)
    env: dict[str, Word]  # `VAR=value` prefixes and `env VAR=value` of this command
    # the processes an MPI / Slurm wrapper starts (`mpirun -np 16 python ...`) and what says so; None: no wrapper
    # or no count stated
    processes: tuple[int, str] | None = None
    # whose arguments these are: "llamafactory", or "hf" for another project's script run by the HF Trainer
    # (`torchrun train.py --deepspeed ds.json --bf16 --output_dir out`), read by its TrainingArguments names only
    trainer: str = "llamafactory"


class _Environment:
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
        k = _skip_prefixes(words, 0, assignments)
        words = words[k:]
        if not words:
            for word in assignments.values():
                self._assign(word, export=False, conditional=conditional)
            return
        head = words[0].text if words[0].literal else ""
        if head in ("export", "declare", "typeset", "local", "readonly"):
            exporting = head == "export" or any(w.text.startswith("-") and "x" in w.text for w in words)
            for word in words[1:]:
                if _ASSIGNMENT.match(word.text):
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
                if _NAME.fullmatch(word.text):
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
_WRITERS = _words("cp mv ln install rsync scp tee wget curl sed awk yq jq envsubst python python3 touch dd truncate")
_CONTROL = {"if": 1, "while": 1, "until": 1, "for": 1, "select": 1, "fi": -1, "done": -1}
_CONTROL.update(dict.fromkeys(("then", "else", "elif", "do", "!", "{"), 0))
_FUNCTION_HEADER = re.compile(r"[ \t]*\([ \t]*\)")
# Commands read through calls, per command of the script: `f1() { f0; f0; }`, `f2() { f1; f1; }` ... doubles
# the work per level, so past this budget a call's assignments become values known only at run time.
CALL_BUDGET = 32


class _Reader:
    """The script's commands in the order they run where the text tells it: top to bottom, with a function's
    body read at each call of it."""

    def __init__(self, doc: Document, lf: LlamaFactorySchema, commands: list[shell.Command]) -> None:
        self.doc, self.lf, self.commands = doc, lf, commands
        self.environment = _Environment(doc.text)
        self.sources: dict[int, Source] = {}  # by the index of the launch's command
        self.functions, self.headers = _function_bodies(doc.text, commands)
        called = {_head(c.words) for i, c in enumerate(commands) if c.depth == 0 and i not in self.headers}
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
                    self.sources[i] = _source(self.doc, launch, self.environment, self.lf)
                    self.sources[i].command["written"] = self._written_before()
                    self.sources[i].command["cut_off"] = _cut_off(self.doc.text, self.commands, i)
            else:
                if _head(words) in _WRITERS:
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
        name = _head(words)
        body = self.functions.get(name)
        if body is None:
            return False
        self.conditional_calls += conditional
        before = dict(self.environment.static)
        if self.budget <= 0 or name in self.stack:  # recursion, or past the budget: what any function sets is unknown
            for command in (self.commands[i] for a, b in self.functions.values() for i in range(a, b)):
                for word in command.words:
                    if _ASSIGNMENT.match(word.text):
                        self.environment.static[word.text.partition("=")[0].rstrip("+")] = None
            self.conditional_calls -= conditional
            return True
        self.stack.append(name)
        self.run(*body)
        self.stack.pop()
        self.conditional_calls -= conditional
        for local in _locals(self.commands[body[0] : body[1]]):
            if local in before:
                self.environment.static[local] = before[local]
            else:
                self.environment.static.pop(local, None)
        return True


def _cut_off(text: str, commands: list[shell.Command], i: int) -> tuple[int, int, int, str] | None:
    """Arguments the launch at `i` was meant to have but bash runs as a command of their own: the next command
    starts with an option word (`--bf16 ...`, a program no one names so), because a commented-out line or a line
    without its `\\` ended the launch. (where the launch ends, the cut words' start and end, why it ended)."""
    launch = commands[i]
    nxt = next((c for c in commands[i + 1 :] if c.depth == 0 and c.start >= launch.end), None)
    if launch.depth or nxt is None or not launch.words:
        return None
    first = nxt.words[0]
    if not (first.literal and first.text.startswith("-") and len(first.text) > 1 and first.text != "--"):
        return None
    between = text[launch.end : nxt.start]
    code = "\n".join(line.partition("#")[0] for line in between.split("\n"))
    if between.count("\n") > _MAX_CUT_LINES or any(op in code for op in ";&|"):
        return None  # `cmd; --x` or a far-away line: not one command cut in two
    lines = between.split("\n")
    comment = any(line.lstrip().startswith("#") for line in lines[1:])
    why = "comment" if comment else "blank" if any(not line.strip() for line in lines[1:-1]) else "no-continuation"
    return launch.end, nxt.start, nxt.end, why


_MAX_CUT_LINES = 4  # the launch's last line, a commented-out or blank line or two, the cut arguments' first


def _head(words: list[Word]) -> str:
    """The command's program name as written ("" when it is an expansion)."""
    k = _skip_prefixes(words, 0, {})
    return words[k].text if k < len(words) and words[k].literal else ""


def _function_bodies(text: str, commands: list[shell.Command]) -> tuple[dict[str, tuple[int, int]], set[int]]:
    """Each function of the script (`f() { ...; }`, `function f { ... }`): the command indexes of its body, from
    the command that opens its `{` to the one that closes it (`f() ( ... )` is not followed); and the headers
    (`f()` alone), which run nothing. A function written twice: the last one, as bash defines it again."""
    found: dict[str, tuple[int, int]] = {}
    headers: set[int] = set()
    i = 0
    while i < len(commands):
        name, opens = _defined_function(text, commands[i])
        if name is None:
            i += 1
            continue
        if not opens:
            headers.add(i)
            i += 1
            if i >= len(commands) or not _opens_group(commands[i].words[0]):
                continue
        end, level = i + 1, 1
        while end < len(commands) and level > 0:
            first = commands[end].words[0]
            level += _opens_group(first) - (first.literal and first.text == "}")
            end += 1
        found[name] = (i, end)
        i = end
    return found, headers


def _opens_group(word: Word) -> bool:
    return word.literal and word.text == "{"


def _defined_function(text: str, command: shell.Command) -> tuple[str | None, bool]:
    """The name a command defines a function under (`f()`, `function f`, `function f {`), or None; and whether
    the command itself opens the body (`function f {`)."""
    words = command.words
    if command.depth:
        return None, False
    if words[0].literal and words[0].text == "function" and len(words) > 1:
        return words[1].text, len(words) > 2 and _opens_group(words[2])
    if len(words) == 1 and words[0].literal and _FUNCTION_HEADER.match(text, command.end):
        return words[0].text, False
    return None, False


def _locals(body: list[shell.Command]) -> set[str]:
    """The names a body declares `local` (or `declare` / `typeset`, local inside a function)."""
    names = set()
    for command in body:
        words = command.words[_skip_prefixes(command.words, 0, {}) :]
        if words and words[0].text in ("local", "declare", "typeset"):
            names.update(w.text.partition("=")[0].rstrip("+") for w in words[1:] if _NAME.match(w.text))
    return names


# ---------------------------------------------------------------------------------------------- launch shapes
def launch_of(words: list[Word]) -> Launch | None:
    """The LLaMA-Factory launch a simple command is, or None."""
    env: dict[str, Word] = {}
    k = _skip_prefixes(words, 0, env)
    if k >= len(words) or not words[k].literal:
        return None
    name = words[k]
    program = name.text.rsplit("/", 1)[-1]
    if program in ("llamafactory-cli", "lmf"):
        return _cli(name, "cli", program, words[k + 1 :], {}, env)
    if _PYTHON.fullmatch(program):
        return _python(name, words, k + 1, env)
    if program in ("deepspeed", "torchrun"):
        return _launcher(name, program, words, k + 1, env)
    if program == "accelerate" and k + 1 < len(words) and words[k + 1].text == "launch":
        return _launcher(name, "accelerate", words, k + 2, env, "accelerate launch")
    if program in _WRAPPERS:
        return _wrapped(program, words, k + 1, env)
    return None


# Programs that start another one on every rank (MPI, Slurm): `mpirun -np 16 python src/train.py ...`
_WRAPPERS = frozenset({"mpirun", "mpiexec", "orterun", "srun"})
_LAUNCHED = re.compile(r"python(\d+(\.\d+)?)?|torchrun|deepspeed|accelerate|llamafactory-cli|lmf")


def _wrapped(wrapper: str, words: list[Word], k: int, env: dict[str, Word]) -> Launch | None:
    """The launch an MPI or Slurm wrapper runs: its first word naming a launcher or Python (the wrapper's
    options before it are its own); the processes it starts where it says how many."""
    inner = next(
        (j for j in range(k, len(words)) if words[j].literal and _LAUNCHED.fullmatch(words[j].text.rsplit("/", 1)[-1])),
        None,
    )
    if inner is None:
        return None
    launch = launch_of(words[inner:])
    if launch is None:
        return None
    options = _wrapper_options(words[k:inner])
    shown = f"{wrapper} {launch.launcher}"
    launch = launch._replace(launcher=shown, env={**env, **launch.env}, processes=_processes(wrapper, options))
    nodes = options.get("--nodes") or options.get("-N")
    one_task_per_node = not any(o in options for o in ("--ntasks", "-n", "--ntasks-per-node"))
    if wrapper == "srun" and launch.kind == "torchrun" and nodes is not None and one_task_per_node:
        # `srun -N 2 torchrun --nproc_per_node 8 ...`: one torchrun per node, each starting its ranks
        launch = launch._replace(options={"--nnodes": nodes, **launch.options})
    return launch


def _wrapper_options(words: list[Word]) -> dict[str, Word]:
    """`-np 16`, `--ntasks=8`, `-N 2`: each option with the word after it (or its inline value)."""
    options: dict[str, Word] = {}
    for i, word in enumerate(words):
        name, eq, inline = word.text.partition("=")
        if not name.startswith("-"):
            continue
        if eq:
            options[name] = Word(inline, word.start, word.end, word.literal)
        elif i + 1 < len(words):
            options[name] = words[i + 1]
    return options


def _processes(wrapper: str, options: dict[str, Word]) -> tuple[int, str] | None:
    if wrapper != "srun":
        for option in ("-np", "-n", "--np", "-c"):
            count = _count(options.get(option))
            if count is not None:
                return count, f"`{wrapper} {option} {count}`"
        return None
    count = _count(options.get("--ntasks") or options.get("-n"))
    if count is not None:
        return count, f"`srun --ntasks {count}`"
    per_node = _count(options.get("--ntasks-per-node"))
    nodes = _count(options.get("--nodes") or options.get("-N")) or (None if per_node is None else 1)
    if per_node is not None and nodes is not None:
        return per_node * nodes, f"`srun --ntasks-per-node {per_node}` x {nodes} node(s)"
    return None


def _skip_prefixes(words: list[Word], k: int, env: dict[str, Word]) -> int:
    """The index of the word naming the program, past reserved words, `VAR=value` assignments, a one-line
    function's head (`function f {`), `coproc [NAME]` and the commands that run another one (`nohup`, `time -p`,
    `env -u X A=1`, `nice -n 5`, `timeout 1h`, `sudo -E`)."""
    while k < len(words):
        word = words[k]
        text = word.text
        if _ASSIGNMENT.match(text):
            env[text.partition("=")[0]] = word
            k += 1
        elif not word.literal:
            return k
        elif text in ("do", "then", "else", "elif", "if", "while", "until", "!", "{", "nohup", "builtin"):
            k += 1
        elif text in ("time", "command", "exec", "env", "nice", "timeout", "stdbuf", "sudo"):
            k = _skip_wrapper_options(words, k + 1, text)
        elif text == "function":  # `function f { ...; }` on one line: the body's first command follows
            k += 2
        elif text == "coproc":  # `coproc CMD ...`, `coproc NAME { CMD ...; }`
            named = k + 2 < len(words) and words[k + 2].text == "{" and _NAME.fullmatch(words[k + 1].text)
            k += 2 if named else 1
        else:
            return k
    return k


# Options of the wrappers that take a separate value (`env -u NAME`, `nice -n 5`, `sudo -u user`).
_WRAPPER_VALUES = {
    "env": ("-u", "--unset", "-C", "--chdir", "-S"),
    "exec": ("-a",),
    "nice": ("-n", "--adjustment"),
    "timeout": ("-s", "--signal", "-k", "--kill-after"),
    "stdbuf": ("-i", "-o", "-e"),
    "sudo": ("-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U"),
}


def _skip_wrapper_options(words: list[Word], k: int, wrapper: str) -> int:
    """Skip a wrapper's options (and `timeout`'s duration); the program it runs comes next."""
    takes_value = _WRAPPER_VALUES.get(wrapper, ())
    while k < len(words):
        text = words[k].text
        if not (text.startswith("-") and (len(text) > 1 or wrapper == "env")):
            break
        k += 2 if text in takes_value else 1
    if wrapper == "timeout" and k < len(words):
        k += 1  # the duration
    return k


def _cli(
    name: Word, kind: str, shown: str, rest: list[Word], options: dict[str, Word], env: dict[str, Word]
) -> Launch | None:
    if not rest or rest[0].text not in _SUBCOMMAND_GROUP:
        return None
    return Launch(name, kind, shown, rest[0].text, rest[0], rest[1:], options, env)


def _python(name: Word, words: list[Word], k: int, env: dict[str, Word]) -> Launch | None:
    """`python [-u] src/train.py ...`, `python -m llamafactory.cli train ...`, `python -m torch.distributed.run
    ...` (torchrun)."""
    options, k = _options(words, k, "python")
    module = options.get("-m")
    if "-c" in options:
        return None
    if module is not None:
        if module.text in ("torch.distributed.run", "torch.distributed.launch"):
            return _launcher(name, "torchrun", words, k, env, f"python -m {module.text}")
        return _entry_point(name, "python", f"python -m {module.text}", module.text, True, words[k:], options, env)
    if k >= len(words) or not _script_path(words[k]):
        return None
    shown = f"python {words[k].text}"
    return _entry_point(name, "python", shown, words[k].text, False, words[k + 1 :], options, env)


def _launcher(name: Word, kind: str, words: list[Word], k: int, env: dict[str, Word], shown: str = "") -> Launch | None:
    """`deepspeed [options] SCRIPT ...`, `torchrun [options] SCRIPT ...`, `accelerate launch [options] SCRIPT
    ...`: the options before the script are the launcher's."""
    options, k = _options(words, k, kind)
    if k >= len(words) or not _script_path(words[k]):
        return None
    module = any(flag in options for flag in ("-m", "--module"))
    shown = f"{shown or kind} {words[k].text}"
    return _entry_point(name, kind, shown, words[k].text, module, words[k + 1 :], options, env)


_UNKNOWN_OPTIONS = "$"  # the key of `options` that says an expansion there may hold any launcher option


def _options(words: list[Word], k: int, kind: str) -> tuple[dict[str, Word], int]:
    """The options of a launcher (or of python) from k, and the index of the word after them."""
    flags = _FLAGS[kind]
    options: dict[str, Word] = {}
    while k < len(words) and ((words[k].text.startswith("-") and len(words[k].text) > 1) or words[k].spread):
        if words[k].spread and not words[k].text.startswith("-"):
            if words[k].text.endswith(".py") and _script_path(words[k]):
                break  # `${base_path}/src/train.py`: the script, wherever the checkout is
            options[_UNKNOWN_OPTIONS] = words[k]  # `torchrun $DIST_ARGS src/train.py`: known only at run time
            k += 1
            continue
        text = words[k].text
        option, eq, inline = text.partition("=")
        followed_by_script = k + 1 < len(words) and words[k + 1].text.endswith(".py")
        takes_value = not eq and text not in flags and not followed_by_script
        if (kind == "python" and text in ("-m", "-c", "-W", "-X")) or (kind != "python" and takes_value):
            if k + 1 >= len(words):
                return options, len(words)
            options[option] = words[k + 1]
            if text in ("-m", "-c"):  # python: what follows is the module's arguments
                return options, k + 2
            k += 2
            continue
        options[option] = Word(inline, words[k].start, words[k].end, words[k].literal) if eq else words[k]
        k += 1
    return options, k


def _entry_point(
    name: Word,
    kind: str,
    shown: str,
    target: str,
    module: bool,
    rest: list[Word],
    options: dict[str, Word],
    env: dict[str, Word],
) -> Launch | None:
    """LLaMA-Factory's arguments when `target` (a script path, or a module name) is one of its entry points."""
    if module:
        if target == "llamafactory.cli":
            return _cli(name, "cli" if kind == "python" else kind, shown, rest, options, env)
        if target == "llamafactory.launcher":
            return Launch(name, kind, shown, "train", None, rest, options, env)
        return None
    path = target.replace("\\", "/")
    if path.endswith(("llamafactory/launcher.py", "train_bash.py")):
        return Launch(name, kind, shown, "train", None, rest, options, env)
    if path == "src/train.py" or path.endswith("/src/train.py"):
        signed = (rest and _is_config(rest[0])) or any(w.text.partition("=")[0] in _SIGNATURE_KEYS for w in rest)
        if signed:
            return Launch(name, kind, shown, "train", None, rest, options, env)
    if path.endswith(".py") and _hf_trainer_arguments(rest):
        return Launch(name, kind, shown, "train", None, rest, options, env, trainer="hf")
    return None


def _hf_trainer_arguments(words: list[Word]) -> bool:
    """Do the arguments read as the HF Trainer's (`HfArgumentParser` over TrainingArguments)? `--output_dir` with
    `--per_device_train_batch_size`, or with a `--deepspeed` naming a JSON file (DeepSpeed's own `--deepspeed`
    is a flag, its file `--deepspeed_config`)."""
    keys = [w.text.partition("=") for w in words]
    if not any(key == "--output_dir" for key, _, _ in keys):
        return False
    for i, (key, eq, inline) in enumerate(keys):
        if key == "--per_device_train_batch_size":
            return True
        if key == "--deepspeed":
            value = inline if eq else (words[i + 1].text if i + 1 < len(words) else "")
            if value.endswith(".json"):
                return True
    return False


def _script_path(word: Word) -> bool:
    """Can the word name an entry point? A literal one, or one whose last path component is literal
    (`${base_path}/src/train_bash.py`, `"$LF_DIR"/src/train.py`: where the checkout is does not matter)."""
    tail = word.text.rsplit("/", 1)
    return word.literal or (len(tail) == 2 and not set("$`\"'") & set(tail[1]))


def _is_config(word: Word) -> bool:
    return word.text.endswith(CONFIG_SUFFIXES) and not word.text.startswith("-")


# ---------------------------------------------------------------------------------------------- GPU count
def _count(word: Word | None) -> int | None:
    if word is None or not word.literal:
        return None
    count = integer(word.text)
    return count if count is not None and 0 < count <= MAX_GPUS else None


def launcher_precision(launch: Launch, env: dict[str, Word]) -> str | None:
    """The mixed precision the launch sets outside LLaMA-Factory's arguments: `accelerate launch
    --mixed_precision bf16` or `ACCELERATE_MIXED_PRECISION=bf16`, which the HF Trainer reads when neither `bf16`
    nor `fp16` is set (transformers 5.6 training_args.py L1580); "unknown" when an accelerate config file or an
    expansion may set it; None when nothing does."""
    word = launch.options.get("--mixed_precision") or launch.options.get("--mixed-precision")
    word = word or env.get("ACCELERATE_MIXED_PRECISION")
    if word is not None:
        value = word.text.partition("=")[2] if word.text.startswith("ACCELERATE_MIXED_PRECISION=") else word.text
        return value if word.literal else "unknown"
    if launch.kind == "accelerate" and any(o in launch.options for o in ("--config_file", "--config-file")):
        return "unknown"
    return None


def launcher_gpus(launch: Launch, environment: _Environment, doc: Document) -> tuple[int, str] | None:
    """How many GPUs (processes) the launch starts in all, and what says so; None when unknown. The processes
    per node times the nodes (`--nnodes`, `--num_nodes`, `NNODES`), where both are stated."""
    env = {**environment.exported, **launch.env}
    per_node = _per_node(launch, env, doc)
    if per_node is None:
        return None
    nodes = _nodes(launch, env, doc)
    if nodes is None:
        return per_node
    return per_node[0] * nodes[0], f"{per_node[1]} x {nodes[1]}"


def _per_node(launch: Launch, env: dict[str, Word | None], doc: Document) -> tuple[int, str] | None:
    opts = launch.options
    kind = launch.kind
    if launch.processes is not None and kind == "python":
        return launch.processes  # one rank per process the wrapper starts
    hosts = _hostfile(opts.get("--hostfile"), doc) if kind == "deepspeed" else None
    for option in ("--num_gpus", "--num_accelerators", "--nproc_per_node", "--nproc-per-node", "--num_processes"):
        count = _count(opts.get(option))
        if count is not None and option in opts and not hosts:
            return count, f"`{option} {count}`"
    if _UNKNOWN_OPTIONS in opts:
        return None
    hosts = _hostfile(opts.get("--hostfile"), doc) if kind == "deepspeed" and "--include" not in opts else None
    if hosts:
        return _hostfile_gpus(hosts, opts)
    if kind == "deepspeed" and "--include" in opts and opts["--include"].literal:
        hosts = opts["--include"].text.split("@")
        count = sum(len([d for d in h.partition(":")[2].split(",") if d]) for h in hosts)
        if count:
            return count, f"`--include {opts['--include'].text}`"
    if kind == "torchrun" and not any(o in opts for o in ("--nproc_per_node", "--nproc-per-node")):
        return 1, "torchrun's default `--nproc_per_node 1`"
    if kind == "accelerate" and any(o in opts for o in ("--config_file", "--config-file")):
        return None  # the count is in accelerate's config file
    nproc = env.get("NPROC_PER_NODE")
    if kind == "cli" and nproc is not None:
        count = _count(Word(nproc.text.partition("=")[2], 0, 0, nproc.literal))
        if count:
            return count, _where(nproc, doc)
    for name in VISIBLE_DEVICES:
        word = env.get(name)
        if word is not None:
            value = word.text.partition("=")[2]
            devices = [d for d in value.split(",") if d.strip()]
            return (len(devices), _where(word, doc)) if word.literal and devices else None
    return None


_HOSTFILE_LINE = re.compile(r"^(\S+)\s+slots=(\d+)")


def _hostfile(word: Word | None, doc: Document) -> list[tuple[str, int]] | None:
    """The hosts and slots of a `deepspeed --hostfile` kept beside the script (a relative path below its folder,
    read as DeepSpeed's runner reads it: `host slots=N` lines, `#` comments); None when it is not there, not
    readable or not one DeepSpeed would accept (the file on the cluster is then unknown)."""
    if word is None or not word.literal or os.path.isabs(word.text) or ".." in word.text.replace("\\", "/").split("/"):
        return None
    try:
        text = read_text_bounded(doc.path.parent / word.text, 64 * 1024)
    except OSError:
        return None
    hosts: list[tuple[str, int]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = _HOSTFILE_LINE.search(line)
        if match is None or any(host == match.group(1) for host, _ in hosts):
            return None  # DeepSpeed stops on a bad or repeated entry
        hosts.append((match.group(1), integer(match.group(2)) or 0))
    return hosts or None


def _hostfile_gpus(hosts: list[tuple[str, int]], opts: dict[str, Word]) -> tuple[int, str] | None:
    """DeepSpeed's runner over a hostfile (`apply_num_nodes_and_gpus`): the first `--num_nodes` hosts, each with
    `--num_gpus` slots or all of its own."""
    nodes, per_host = _count(opts.get("--num_nodes")), _count(opts.get("--num_gpus"))
    if ("--num_nodes" in opts and nodes is None) or ("--num_gpus" in opts and per_host is None):
        return None
    used = hosts[:nodes] if nodes else hosts
    total = sum(per_host or slots for _, slots in used)
    if not 0 < total <= MAX_GPUS:
        return None
    shown = f"`--hostfile {opts['--hostfile'].text}` ({len(used)} host(s)"
    return total, shown + (f", `--num_gpus {per_host}` each)" if per_host else ")")


def _nodes(launch: Launch, env: dict[str, Word | None], doc: Document) -> tuple[int, str] | None:
    """The nodes a launch spans where more than one is stated (accelerate's `--num_processes` counts every
    machine's already); None for one node or an unknown count."""
    if launch.kind == "deepspeed" and _hostfile(launch.options.get("--hostfile"), doc):
        return None  # the hostfile's hosts are counted already
    options = {"torchrun": ("--nnodes",), "deepspeed": ("--num_nodes",)}.get(launch.kind, ())
    for option in options:
        count = _count(launch.options.get(option))
        if count is not None and count > 1:
            return count, f"`{option} {count}`"
    word = env.get("NNODES")
    if launch.kind == "cli" and word is not None:
        count = _count(Word(word.text.partition("=")[2], 0, 0, word.literal))
        if count is not None and count > 1:
            return count, _where(word, doc)
    return None


def _where(word: Word, doc: Document) -> str:
    return f"`{word.text}` (line {doc.position(word.start)[0]})"


# ---------------------------------------------------------------------------------------------- the source
def _source(doc: Document, launch: Launch, environment: _Environment, lf: LlamaFactorySchema) -> Source:
    """The source of one launch: its arguments as entries, argparse's conversion applied; after a YAML, the
    line's overrides as the selected release's `read_args` reads them (the engine merges the YAML under them)."""
    args = launch.args
    source = Source(document=doc, kind=Kind.LF_CLI)
    end = args[-1].end if args else (launch.subcommand_word or launch.name).end
    env = {**environment.exported, **launch.env}
    source.command = {
        "launcher": launch.launcher,
        "launcher_kind": launch.kind,
        "subcommand": launch.subcommand,
        "group": _SUBCOMMAND_GROUP[launch.subcommand],
        "start": launch.name.start,
        "end": end,
        "yaml": None,
        "open": False,  # True: an expansion may carry arguments cfgopt cannot see (no "missing" verdicts)
        "launcher_gpus": launcher_gpus(launch, environment, doc),
        "launcher_precision": launcher_precision(launch, env),
        "env": {name: (w.text.partition("=")[2] if w.literal else None) for name, w in env.items()},
        "argparse_errors": [],
        "trainer": launch.trainer,
        # accelerate's own options (`--config_file`, `--use_fsdp`, `--fsdp_*`): the value's text, None where known
        # only at run time; the engine reads the config file they name (`cfgopt.project.launch_jobs.accelerate_config`)
        "launcher_options": _accelerate_options(launch),
        "launch_errors": [],  # (start, end, message, replacement or None): the line stops before training (LF044)
        "unknown": [],  # spans of values known only at run time: no finding is about them
    }
    fields = lf.group(source.command["group"])
    if args and _is_config(args[0]):
        first = args[0]
        source.command["yaml"] = (first.text, first.start, first.end, first.literal)
        entries, value = overrides.read(source, args[1:], lf, fields)
        source.command["overrides"] = value
        source.root = Node(value=dict(value), start=first.start, end=first.end, entries=entries)
        return source
    if args and not args[0].literal and not args[0].text.startswith("-"):
        source.command["open"] = True  # `llamafactory-cli train "$1"`: perhaps the config's path
        args = args[1:]
    entries, value = _arguments(source, args, fields)
    if launch.trainer == "hf":  # the script's own parser reads the rest, and it trains whatever `do_train` says
        source.command["argparse_errors"] = []
        value.setdefault("do_train", True)
    source.root = Node(value=value, start=launch.name.start, end=end, entries=entries)
    return source


def _accelerate_options(launch: Launch) -> dict[str, str | None]:
    if launch.kind != "accelerate":
        return {}
    return {name: (word.text if word.literal else None) for name, word in launch.options.items()}


def _arguments(source: Source, args: list[Word], fields) -> tuple[list[Entry], dict[str, object]]:
    """`--key value` arguments as HfArgumentParser's argparse reads them."""
    from cfgopt.knowledge import schema

    entries: list[Entry] = []
    value: dict[str, object] = {}
    errors = source.command["argparse_errors"]
    text = source.document.text
    i = 0
    while i < len(args):
        word = args[i]
        if not word.literal and (word.spread or word.text.startswith("--")) and "=" not in word.text:
            source.command["open"] = True  # `"$@"`, `$EXTRA_ARGS`, `--$KEY`: arguments known only at run time
            i += 1
            continue
        if not word.text.startswith("--"):
            errors.append((word.start, word.end, f"unrecognized argument: {word.text}"))
            i += 1
            continue
        key, eq, inline = word.text[2:].partition("=")
        name = key if key in fields else key.replace("-", "_")
        spec = fields.get(name)
        verbatim = text[word.start : word.end] == word.text
        key_end = word.start + 2 + len(key) if verbatim else word.end
        value_word = word
        if eq:
            start = key_end + 1 if verbatim else word.start
            vnode = Node(value=inline, start=start, end=word.end, raw=inline if word.literal else None)
            i += 1
        elif i + 1 < len(args) and not args[i + 1].text.startswith("--"):
            value_word = args[i + 1]
            # an expansion (`$LR`, `$(date)`) has no value until the script runs: raw None, no argparse check
            vnode = Node(
                value_word.text, value_word.start, value_word.end, raw=value_word.text if value_word.literal else None
            )
            i += 2
        else:  # a bare flag: HfArgumentParser gives bool fields nargs="?" const=True
            vnode = Node(value=True, start=word.start, end=word.start, raw=None)
            if spec is not None and not spec.is_bool:
                errors.append((word.start, word.end, f"argument --{key}: expected one argument"))
            i += 1
        if not value_word.literal:
            source.command["unknown"].append((vnode.start, vnode.end))
        if spec is not None and vnode.raw is not None:
            ok, converted, _ = schema.argparse_convert(spec, vnode.raw)
            if ok:
                vnode.value = converted
        entry = Entry(key=name, key_start=word.start, key_end=key_end, node=vnode, path=(name,))
        editable = shell.static_word(value_word)
        at = (shell.locate(text, word, 2 + len(key)) or (-1, "")) if eq else (-1, "")
        computed = word.expanded or (value_word.expanded and value_word.start == word.start)
        entry.argument = Argument(word.text, word.start, word.end, verbatim, bool(eq), False, editable, *at, computed)
        entries.append(entry)
        value[name] = vnode.value
    return entries, value
