"""A launch in a script with CRLF line endings (LF055): what bash passes it, where cfgopt reads the script as the
user sees it.

bash ends a line at `\\n` only: a CR is an ordinary character of the line. So the CR that ends a CRLF line joins the
launch's last word (`cfg.yaml` becomes `cfg.yaml\\r`) or, after a blank, is a word of its own; and `\\` + CRLF is no
continuation: the `\\` quotes the CR (a word `$'\\r'`, or the CR joining the word the `\\` ends), and the newline ends
the command, so the lines below run as commands of their own. The launch bash runs is read again with those words,
by the same argparse and `read_args` model (`source.launch_source`), to say whether it stops, or runs with a value
that holds a CR or without the lines below.
"""

from __future__ import annotations

from cfgopt.loaders import shell
from cfgopt.loaders.launch.source import launch_source
from cfgopt.loaders.shell import Word
from cfgopt.text.record import Record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from cfgopt.knowledge.schema import LlamaFactorySchema
    from cfgopt.loaders.launch.environment import ScriptEnvironment
    from cfgopt.loaders.launch.shapes import Launch
    from cfgopt.text.document import Document
    from cfgopt.text.source import Source

CR = "\r"


class CarriageReturn(Record):
    """The first CR bash reads into a launch, and what it does there."""

    at: int  # the CR's offset
    start: int  # where the finding starts: the word the CR joins, the `\` before it, or the CR
    how: str  # "cut": `\` + CR ends the command; "word": the CR ends the last word; "blank": a word of its own
    word: str  # the word the CR joins as bash reads it ("" where the CR is a word of its own)
    failure: str  # what stops the launch, as the real parser says it ("" where it runs)
    value: str  # a key whose text value holds the CR where the launch runs ("" where none)
    dropped: str  # the first word of the lines below that never reach the launch ("" where none)


def carriage_return(
    doc: Document,
    launch: Launch,
    command: shell.Command,
    environment: ScriptEnvironment,
    lf: LlamaFactorySchema,
    seen: Source,
) -> CarriageReturn | None:
    """What bash does with the first CR that reaches the launch `seen` (its source as cfgopt reads it), or None
    where no CR reaches it."""
    found = _first_cr(doc.text, command, shell.scan(doc.text).layout)
    if found is None:
        return None
    at, how, attached = found
    cut_at = at - 1 if how == "cut" else at  # the launch's words end before the `\` (or the CR)
    before = [w for w in command.words if w.start < cut_at]
    joins = before[-1] if attached and before else None
    word = joins.text + CR if joins is not None else ""
    start = joins.start if joins is not None else cut_at
    dropped = next((w.text for w in launch.args if w.start > at), "") if how == "cut" else ""
    lead = [w for w in command.words if not launch.args or w.end <= launch.args[0].start]
    if not lead or lead[-1].start >= cut_at or (joins is not None and joins.start == lead[-1].start):
        words = [w.text for w in before[:-1]] + [word] if joins is not None else [w.text for w in before] + ["$'\\r'"]
        failure = f"bash runs `{_escaped(' '.join(words))}` and no training"
        return CarriageReturn(at, start, how, word, failure, "", dropped)
    args = [w for w in launch.args if w.start < cut_at]
    if joins is not None:
        args[-1] = args[-1]._replace(text=word)
    else:
        args.append(Word(CR, at, at + 1))
    bash = launch_source(doc, launch._replace(args=args), environment, lf)
    failure, value = _verdict(bash, seen, lf)
    named = seen.command.get("yaml")
    if joins is not None and named is not None and named[1] == joins.start:
        failure = (
            f"`read_args` does not take `{_escaped(word)}` for a YAML, its name ending in a CR: none of its values "
            "reach LLaMA-Factory, which stops with a ValueError"
        )
    if not failure and joins is None and not any(e.node.start == at for e in _entries(bash)):
        failure = _unused(CR)  # an HF script's own parser (no argparse model here) leaves it unused as well
    return CarriageReturn(at, start, how, word, failure, value, dropped)


def _entries(source: Source) -> list:
    return source.root.entries if source.root is not None else []


def _first_cr(text: str, command: shell.Command, layout: shell.ScriptLayout) -> tuple[int, str, bool] | None:
    """The first CR bash reads into the command: (its offset, how, whether it joins the word before it). cfgopt's
    reading of the command runs over `\\` + CRLF continuations, so each of its line ends is looked at in turn."""
    i = command.start
    while True:
        nl = text.find("\n", i)
        if nl < 0 or nl == 0:
            return None
        at = nl - 1
        if layout.in_opaque(nl):  # a quoted string over lines: the CR is the string's, read as written
            i = nl + 1
            continue
        if text[at] != CR:
            if nl < command.end:  # a `\` + LF continuation
                i = nl + 1
                continue
            return None
        tail = text[command.end : at] if command.end <= at else ""  # after the command's last word, on its line
        if nl < command.end or tail.strip(" \t") == "\\":
            if text[at - 1] != "\\":
                i = nl + 1
                continue
            return at, "cut", text[at - 2] not in " \t\n"
        if tail == "":
            return at, "word", True
        return (at, "blank", False) if not tail.strip(" \t") else None  # `;`, `#`, `>`: the launch ended before


def _verdict(bash: Source, seen: Source, lf: LlamaFactorySchema) -> tuple[str, str]:
    """(what stops the launch bash runs, a key whose text value holds a CR): the failures its words add to those
    cfgopt's reading has (argparse's, `read_args`'), and a value argparse rejects or keeps with the CR."""
    from cfgopt.knowledge import schema

    for kind in ("argparse_errors", "launch_errors"):
        had = {error[:3] for error in seen.command.get(kind, ())}
        new = [error for error in bash.command.get(kind, ()) if error[:3] not in had]
        if new:
            message = new[0][2]
            unknown = message.startswith(_UNRECOGNIZED)
            return (_unused(message[len(_UNRECOGNIZED) :]) if unknown else _escaped(message)), ""
    fields = lf.group(bash.command["group"])
    for entry in _entries(bash):
        raw = entry.node.raw
        if CR in entry.key:
            return _unused(f"--{entry.key}"), ""
        if not isinstance(raw, str) or CR not in raw or entry.key not in fields:
            continue
        ok, converted, error = schema.argparse_convert(fields[entry.key], raw)
        if not ok:
            return f"argument --{entry.key}: {_escaped(error)}", ""
        if isinstance(converted, str) and CR in converted:
            return "", entry.key
    return "", ""


_UNRECOGNIZED = "unrecognized argument: "  # argparse's model's words for a word no option takes (source.py)


def _unused(word: str) -> str:
    """What LLaMA-Factory does with a word HfArgumentParser has no use for: it parses with
    `return_remaining_strings=True` and raises `Some specified arguments are not used` (hparams/parser.py
    L109-114), unless a dataclass's own check stops it first (`Please provide model_name_or_path` where the word cut
    the launch before that argument): a ValueError either way."""
    return f"HfArgumentParser has no use for `{_escaped(word)}`, and LLaMA-Factory stops with a ValueError"


def _escaped(text: str) -> str:
    return text.replace(CR, "\\r")
