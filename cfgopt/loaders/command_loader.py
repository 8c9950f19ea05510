"""`llamafactory-cli` command lines inside shell scripts, read the way LLaMA-Factory reads `sys.argv`.

How cfgopt reports a command line (documented in docs/command-lines.md): every `llamafactory-cli` (or
`lmf`) invocation in a `.sh`/`.bash` file becomes one source whose entries are its `--key value` arguments,
spans on the tokens. Without a YAML, LLaMA-Factory hands the arguments to `HfArgumentParser`, whose
argparse rejects an invalid choice or a non-boolean at once (exit 2); the rules report exactly that.
With a YAML (`llamafactory-cli train cfg.yaml key=value`), the YAML is linted as its own file.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from cfgopt.document import Document
from cfgopt.loaders import shell
from cfgopt.source import Entry, Kind, Node, Source

if TYPE_CHECKING:
    from cfgopt.schema import LlamaFactorySchema

_COMMAND = re.compile(r"(?m)(?:^|[;&|(]\s*|^\s*(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)+)(llamafactory-cli|lmf)(?=\s)")
_SUBCOMMAND_GROUP = {
    "train": "train",
    "chat": "infer",
    "export": "infer",
    "api": "infer",
    "webchat": "infer",
    "eval": "eval",
}


def _tokens(text: str, start: int) -> list[tuple[str, int, int, bool]]:
    """Shell words from `start` to the end of the command, with spans and whether each is literal."""
    return [(w.text, w.start, w.end, w.literal) for w in shell.command_words(text, start).words]


def find_commands(doc: Document, lf: LlamaFactorySchema | None = None) -> list[Source]:
    """One source per `llamafactory-cli <subcommand> --key value ...` command line in the script."""
    from cfgopt import schema

    sources = []
    layout = None
    covered = 0  # the end of the last command read: a match before it is inside one of its words
    for match in _COMMAND.finditer(doc.text):
        if layout is None:
            layout = shell.layout(doc.text)
        if match.start(1) < covered or layout.in_comment(match.start(1)) or layout.in_opaque(match.start(1)):
            continue  # inside a `$(...)` of the last command, commented out, or text in a heredoc or a string
        tokens = _tokens(doc.text, match.end(1))
        covered = tokens[-1][2] if tokens else covered
        if not tokens or tokens[0][0] not in _SUBCOMMAND_GROUP:
            continue
        subcommand, _, sub_end, _ = tokens[0]
        args = tokens[1:]
        source = Source(document=doc, kind=Kind.LF_CLI)
        source.command = {
            "subcommand": subcommand,
            "group": _SUBCOMMAND_GROUP[subcommand],
            "start": match.start(1),
            "end": args[-1][2] if args else sub_end,
            "yaml": None,
            "argparse_errors": [],
        }
        if args and args[0][0].endswith((".yaml", ".yml", ".json")):
            source.command["yaml"] = args[0]
            source.root = Node(value={}, start=args[0][1], end=args[0][2], entries=[])
            sources.append(source)
            continue
        fields = (lf or schema.llamafactory()).group(source.command["group"])
        entries: list[Entry] = []
        value: dict[str, object] = {}
        i = 0
        while i < len(args):
            word, begin, end, literal = args[i]
            if not literal and word.startswith("--") and "=" not in word:
                i += 1  # `--$KEY`: which argument this is is known only when the script runs
                continue
            if not word.startswith("--"):
                source.command["argparse_errors"].append((begin, end, f"unrecognized argument: {word}"))
                i += 1
                continue
            key, _, inline = word[2:].partition("=")
            name = key if key in fields else key.replace("-", "_")
            spec = fields.get(name)
            key_end = begin + 2 + len(key)
            if "=" in word:
                vnode = Node(value=inline, start=key_end + 1, end=end, raw=inline if literal else None)
                i += 1
            elif i + 1 < len(args) and not args[i + 1][0].startswith("--"):
                vword, vbegin, vend, vliteral = args[i + 1]
                # an expansion (`$LR`, `$(date)`) has no value until the script runs: raw None, no argparse check
                vnode = Node(value=vword, start=vbegin, end=vend, raw=vword if vliteral else None)
                i += 2
            else:  # a bare flag: HfArgumentParser gives bool fields nargs="?" const=True
                vnode = Node(value=True, start=begin, end=begin, raw=None)
                if spec is not None and not spec.is_bool:
                    source.command["argparse_errors"].append((begin, end, f"argument --{key}: expected one argument"))
                i += 1
            if spec is not None and vnode.raw is not None:
                ok, converted, _ = schema.argparse_convert(spec, vnode.raw)
                if ok:
                    vnode.value = converted
            entry = Entry(key=name, key_start=begin, key_end=key_end, node=vnode, path=(name,))
            entries.append(entry)
            value[name] = vnode.value
        source.root = Node(value=value, start=match.start(1), end=source.command["end"], entries=entries)
        sources.append(source)
    return sources
