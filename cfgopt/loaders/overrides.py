"""What follows the YAML on a launch line (`llamafactory-cli train cfg.yaml ...`), as each LLaMA-Factory release's
`read_args` reads it:

- 0.9.0-0.9.2 read a YAML only when it is the only argument (`len(sys.argv) == 2`; v0.9.1
  src/llamafactory/hparams/parser.py L59, v0.9.2 L64): with anything after it, the whole line goes to argparse,
  which keeps the YAML's path as an unknown argument, and `_parse_args` stops with `Some specified arguments are
  not used by the HfArgumentParser`.
- 0.9.3 and later read the rest of the line with `OmegaConf.from_cli` and merge it over the YAML (v0.9.3 L63-66,
  v0.9.5 L90-93): `key=value` sets a key (the value read as YAML), a word without `=` is a key whose value is
  None, so `--template qwen` becomes the keys `--template` and `qwen`, and `parse_dict` stops with `Some keys are
  not used by the HfArgumentParser: ['--template', 'qwen']`.
- 0.9.5 reads a JSON config with `json.load(Path(...))` (L96), which fails at once: a Path has no `read`.

The line's entries are its `key=value` words (YAML values, spans on the words); the failures go to
`command["launch_errors"]`, reported by LF044.
"""

from __future__ import annotations

import shlex

import yaml

from cfgopt.loaders import shell
from cfgopt.loaders.shell import Word
from cfgopt.loaders.yaml_loader import OmegaConfParityLoader
from cfgopt.text.source import Argument, Entry, Node, Source

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from cfgopt.knowledge.schema import LlamaFactorySchema

FIRST_WITH_OVERRIDES = (0, 9, 3)  # read_args with OmegaConf.from_cli (v0.9.3 hparams/parser.py L63)
JSON_UNREADABLE = ((0, 9, 5),)  # read_args: `json.load(Path(sys.argv[1]).absolute())` (v0.9.5 L96)


def read(source: Source, words: list[Word], lf: LlamaFactorySchema, fields) -> tuple[list[Entry], dict[str, Any]]:
    """The entries and values the words after the YAML add to the job, and the line's failures."""
    from cfgopt.text.requirements.versions import version_key

    release = version_key(lf.version)[:3]
    config, start, end, _ = source.command["yaml"]
    errors = source.command["launch_errors"]
    if config.endswith(".json") and release in JSON_UNREADABLE:
        errors.append((start, end, _json_message(lf.version), None))
    source.command["dotlist"] = release >= FIRST_WITH_OVERRIDES
    if not words:
        return [], {}
    if release < FIRST_WITH_OVERRIDES:
        shown = ", ".join(repr(w.text) for w in words[:3]) + (", ..." if len(words) > 3 else "")
        errors.append(
            (
                words[0].start,
                words[-1].end,
                f"LLaMA-Factory {lf.version} reads `{config}` only when it is the only argument (0.9.3 added "
                f"`key=value` overrides): with {shown} after it, the whole line goes to argparse, which stops "
                f"with `Some specified arguments are not used by the HfArgumentParser: [{config!r}, ...]`; put "
                "these values in the YAML",
                None,
            )
        )
        return [], {}
    return _dotlist(source, words, lf.version, fields)


def _json_message(version: str) -> str:
    return (
        f"LLaMA-Factory {version} cannot read a JSON config named on the command line: `read_args` calls "
        "`json.load` on a path (`AttributeError: 'PosixPath' object has no attribute 'read'`); use a YAML config"
    )


def _dotlist(source: Source, words: list[Word], version: str, fields) -> tuple[list[Entry], dict[str, Any]]:
    """`OmegaConf.from_cli` over the words: `key=value` entries; the words it turns into stray keys reported."""
    text = source.document.text
    entries: list[Entry] = []
    values: dict[str, Any] = {}
    i = 0
    while i < len(words):
        word = words[i]
        if word.spread and not word.literal and "=" not in word.text:
            source.command["open"] = True  # `"$@"`, `$EXTRA`: overrides known only at run time
            i += 1
            continue
        key, eq, value = word.text.partition("=")
        if not eq or key.startswith("-"):
            i = _stray(source, words, i, version, fields)
            continue
        verbatim = text[word.start : word.end] == word.text
        key_end = word.start + len(key) if verbatim else word.end
        node = Node(
            value=_yaml_value(value) if word.literal else value,
            start=key_end + 1 if verbatim else word.start,
            end=word.end,
        )
        if not word.literal:
            source.command["unknown"].append((node.start, node.end))
        entry = Entry(key=key, key_start=word.start, key_end=key_end, node=node, path=(key,))
        at = shell.locate(text, word, len(key)) or (-1, "")
        editable = shell.static_word(word)
        entry.argument = Argument(word.text, word.start, word.end, verbatim, True, True, editable, *at, word.expanded)
        entries.append(entry)
        values[key] = node.value
        i += 1
    return last_of_each(entries), values


def last_of_each(entries: list[Entry]) -> list[Entry]:
    """The entries a repeated key leaves in force: the last of each (`OmegaConf.from_cli` and argparse both set a
    key again for each time it is given, so `flash_attn=fa flash_attn=sdpa` runs with sdpa)."""
    last = {entry.key: i for i, entry in enumerate(entries)}
    return [entry for i, entry in enumerate(entries) if last[entry.key] == i]


def _yaml_value(text: str) -> Any:
    """A `key=value` value as OmegaConf's `from_dotlist` reads it: `yaml.load` with OmegaConf's loader."""
    try:
        return yaml.load(text, Loader=OmegaConfParityLoader)
    except yaml.YAMLError:
        return text


def _stray(source: Source, words: list[Word], i: int, version: str, fields) -> int:
    """A word OmegaConf makes a key LLaMA-Factory does not know (`--template`, then `qwen`): one failure per
    option, with the `key=value` word it meant where that is clear. Returns the index after the words used."""
    word = words[i]
    name, eq, inline = word.text.lstrip("-").partition("=")
    name = name if name in fields else name.replace("-", "_")
    used = [word]
    value: str | None = inline if eq else None
    nxt = words[i + 1] if i + 1 < len(words) else None
    pair = not eq and word.text.startswith("-") and nxt is not None and not nxt.text.startswith("-")
    if pair and "=" not in nxt.text:
        used.append(nxt)
        value = nxt.text
    spec = fields.get(name) if word.text.startswith("-") else None
    if value is None and spec is not None and spec.is_bool and not eq:
        value = "true"  # a bare `--do_train`: argparse's const=True
    keys = [w.text.partition("=")[0] if w is word and eq else w.text for w in used]
    replacement = None
    if spec is not None and value is not None and all(w.literal for w in used):
        replacement = shlex.quote(f"{name}={value}")
    written = " ".join(w.text for w in used)
    hint = f"; write `{name}={value}`" if replacement else ""
    source.command["launch_errors"].append(
        (
            used[0].start,
            used[-1].end,
            f"after a YAML, LLaMA-Factory {version} reads the rest of the line with `OmegaConf.from_cli`, which "
            f"makes `{written}` the key{'s' if len(keys) > 1 else ''} {' and '.join(f'`{k}`' for k in keys)}; "
            f"HfArgumentParser then stops (`Some keys are not used by the HfArgumentParser: {keys!r}`){hint}",
            replacement,
        )
    )
    return i + len(used)
