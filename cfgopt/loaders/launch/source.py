"""The `Source` of one launch: its `--key value` arguments as HfArgumentParser's argparse reads them, or after a
YAML the line's overrides; what the launch states besides them (`command`: launcher, GPU count, mixed
precision, environment, accelerate's options).
"""

from __future__ import annotations

from cfgopt.loaders import overrides, shell
from cfgopt.loaders.launch.environment import ScriptEnvironment
from cfgopt.loaders.launch.gpus import launcher_gpus
from cfgopt.loaders.launch.shapes import SUBCOMMAND_GROUP, Launch, is_config
from cfgopt.loaders.shell import Word
from cfgopt.text.document import Document
from cfgopt.text.source import Argument, Entry, Kind, Node, Source

TYPE_CHECKING = False
if TYPE_CHECKING:
    from cfgopt.knowledge.schema import LlamaFactorySchema


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


def launch_source(doc: Document, launch: Launch, environment: ScriptEnvironment, lf: LlamaFactorySchema) -> Source:
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
        "group": SUBCOMMAND_GROUP[launch.subcommand],
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
    if args and is_config(args[0]):
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
