"""The configs of the project that read a DeepSpeed JSON and are not in the run: looked for before a fix edits it.

A fix that edits a DeepSpeed JSON (the speed plan's lower ZeRO stage, MEM002's and PF051's offloads removed) changes
every job that reads that file, and the run judges only the configs it was given (a pre-commit run: the changed
files). LLaMA-Factory's `examples/deepspeed/ds_z3_config.json` is read by several of its examples: with
`qwen3_full_sft.yaml` and the JSON named, the plan wrote ZeRO-2 there, and a 32B full fine-tune beside it, naming
the same JSON and not named, went from about 77 GiB per 80 GiB H100 (tight) to a predicted 151 GiB (out of memory).

So, only when such an edit is about to be made, the project around the JSON is searched for configs whose
`deepspeed:` (a YAML) or `--deepspeed` / `deepspeed=` (a launch line) resolves to it as the loader resolves a
reference (`project.resolve_reference`). The project: the repository of each config of the run that reads the JSON
and of the JSON itself (`user_files.repository_of`), and the current folder where it holds the JSON (the launch
folder the real tools resolve from). The walk is a folder walk's (`discovery.iter_files`, by name: hidden and package
folders skipped, no symbolic link to a folder followed), each file read as the run reads one (`read_bounded`, at most
`project.MAX_FILE_BYTES`), and only a file naming the JSON's file name (or the name of a link to it) outside
comments, other than as a `deepspeed` value resolving to another file (`_may_read`), is parsed. A file outside the
current folder is taken as launched from its own folder or one above it, not from the current one (another
folder's `ds.json` is its own). Past `MAX_SEARCHED` files the search stops and the JSON is kept: a reader may be
among those not looked at.
"""

from __future__ import annotations

import os
import re
import weakref
from pathlib import Path

from cfgopt.loaders import discovery
from cfgopt.project.project import MAX_FILE_BYTES, resolve_reference
from cfgopt.text.document import Document, DocumentError, real_path
from cfgopt.text.real_paths import realpath
from cfgopt.text.record import Record
from cfgopt.text.user_files import looked_at, read_bounded, repository_of

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

    from cfgopt.knowledge.schema import LlamaFactorySchema
    from cfgopt.text.source import Source

# Files (YAML and scripts) read in one search: LLaMA-Factory's repository holds ~150, cfgopt's ~850. Past it the
# search gives up, and the JSON is kept (the file system may be a whole home folder of projects).
MAX_SEARCHED = 50_000
_READERS = frozenset({".yaml", ".yml", *discovery.SCRIPT_SUFFIXES})


class OutsideReaders(Record):
    """The configs outside the run found reading the JSON, and why the search stopped early ("" where it looked at
    every file). Either keeps the JSON as it is (`keeps_json`)."""

    found: tuple[Path, ...]
    stopped: str = ""

    @property
    def keeps_json(self) -> bool:
        return bool(self.found or self.stopped)


# One search per JSON and run: keyed by the JSON's source (a run's own object), then by the run's readers of it
_SEARCHED: weakref.WeakKeyDictionary[Source, dict[frozenset[Path], OutsideReaders]] = weakref.WeakKeyDictionary()


def outside_readers(json_src: Source, readers: Iterable[Source], lf: LlamaFactorySchema) -> OutsideReaders:
    """The configs of the project that read `json_src` and are none of `readers` (the run's configs that read it);
    `lf`: the schema a launch line is read with."""
    run = frozenset(real_path(r.document.path) for r in readers)
    by_run = _SEARCHED.setdefault(json_src, {})
    if run not in by_run:
        by_run[run] = _search(real_path(json_src.document.path), run, lf)
    return by_run[run]


def _roots(json_path: Path, run: frozenset[Path]) -> list[Path]:
    """The folders searched: each reader's repository and the JSON's, the current folder where it holds the JSON
    (never the home folder or the filesystem root); a folder inside another one once, as part of it."""
    found = [real_path(repository_of(p)) for p in sorted(run)]
    found.append(real_path(repository_of(json_path)))
    cwd = real_path(Path.cwd())
    if json_path.is_relative_to(cwd) and str(cwd) not in (realpath(os.path.expanduser("~")), os.sep):
        found.append(cwd)
    ordered = sorted(dict.fromkeys(found), key=lambda p: len(p.parts))
    return [r for i, r in enumerate(ordered) if not any(r.is_relative_to(o) for o in ordered[:i])]


def _search(json_path: Path, run: frozenset[Path], lf: LlamaFactorySchema) -> OutsideReaders:
    roots = _roots(json_path, run)
    names, candidates = {json_path.name}, []
    for folder, name in _walked(roots):
        suffix, full = _suffix(name).lower(), os.path.join(folder, name)
        if suffix == ".json" and os.path.islink(full) and real_path(full) == json_path:
            names.add(name)  # a link to the JSON under another name: a config may name that one
        elif suffix in _READERS:
            candidates.append(full)
            if len(candidates) > MAX_SEARCHED:
                where = ", ".join(str(r) for r in roots)
                return OutsideReaders((), f"more than {MAX_SEARCHED:,} configs and scripts under {where}")
    needles = [n.encode() for n in names]
    cwd = real_path(Path.cwd())
    found: list[Path] = []
    for name in candidates:
        try:
            raw = read_bounded(name, MAX_FILE_BYTES)
        except OSError:
            continue  # not a regular file, too large, unreadable: no config a run reads either
        if not _holds(raw, needles):
            continue
        path = Path(name)  # only now: most files never name the JSON
        real = real_path(path)  # a file that never names the JSON needs no look at its links either
        if real in run:
            continue
        # launched from the current folder only where it lies inside it (from its own folder, or one above, else)
        from_cwd = real.is_relative_to(cwd)
        if _may_read(raw, needles, json_path, path, from_cwd) and _reads(path, raw, json_path, lf, from_cwd):
            found.append(path)
    return OutsideReaders(tuple(found))


def _walked(roots: list[Path]) -> Iterator[tuple[str, str]]:
    """(folder, name) of each file `discovery.iter_files(roots)` yields, as text: a Path is built only for a file
    that names the JSON (a repository holds hundreds of configs)."""
    for root in roots:
        if looked_at(root, "is_dir"):
            for folder, names in discovery.walk_folders(root):
                for name in names:
                    yield folder, name
        else:  # a root is a folder; one gone since, as `iter_files` takes it
            yield str(root.parent), root.name


def _suffix(name: str) -> str:
    """`Path(name).suffix`: from the last dot, not a leading one nor a final one."""
    dot = name.rfind(".")
    return name[dot:] if 0 < dot < len(name) - 1 else ""


# A `deepspeed` key's or option's value as the text writes it (`deepspeed: x`, `"deepspeed": "x"`, `--deepspeed x`,
# `--deepspeed=x`, `deepspeed=x`): a look at the text before parsing it
_NAMED_AFTER_KEY = re.compile(rb"""deepspeed['"]?[ \t]*[:=]?[ \t]*['"]?([^\s'",#\]}]+)""")


def _may_read(raw: bytes, needles: list[bytes], json_path: Path, path: Path, from_cwd: bool) -> bool:
    """False only where every mention of the JSON's name is in a comment or is a `deepspeed` value that resolves to
    another file (another folder's file of the same name): then the file is not parsed. A line whose text before
    its comment holds a quote is taken as it is (a `#` inside quotes is no comment)."""
    for line in raw.splitlines():
        if not _holds(line, needles):
            continue
        code = _COMMENT.split(line, 1)[0]
        if b'"' in code or b"'" in code:
            code = line
        values = [m.group(1) for m in _NAMED_AFTER_KEY.finditer(code)]
        naming = [v for v in values if any(v.endswith(n) for n in needles)]
        if sum(code.count(n) for n in needles) > len(naming):
            return True  # a mention elsewhere (a variable, a value on its own line): the parse decides
        if any(_resolves_to(v.decode("utf-8", "replace"), path, json_path, from_cwd) for v in naming):
            return True
    return False


def _holds(text: bytes, needles: list[bytes]) -> bool:
    """Does `text` hold one of `needles`? Most often there is one (the JSON's own name), asked alone: a search asks
    this of every file of a repository, and of each line of those that name the JSON."""
    return needles[0] in text if len(needles) == 1 else any(n in text for n in needles)


# where a comment starts, in YAML and in a shell script: a `#` at the start of a line or after a blank
_COMMENT = re.compile(rb"(?:^|(?<=[ \t]))#")


def _resolves_to(ref: object, path: Path, json_path: Path, from_cwd: bool) -> bool:
    if not isinstance(ref, str) or not ref:
        return False
    found, _ = resolve_reference(ref, path, from_cwd)
    return found is not None and real_path(found) == json_path


def _reads(path: Path, raw: bytes, json_path: Path, lf: LlamaFactorySchema, from_cwd: bool) -> bool:
    """Does the file at `path` (its bytes `raw`) name `json_path` as its DeepSpeed config? A file that does not parse
    is no reader (the real tools stop on it too)."""
    try:
        doc = Document.from_bytes(path, raw)
    except DocumentError:
        return False
    if path.suffix.lower() in discovery.SCRIPT_SUFFIXES:
        from cfgopt.loaders.launch import find_commands  # the shell lexer: only for a script naming the JSON

        refs = [s.data.get("deepspeed") for s in find_commands(doc, lf) if isinstance(s.data, dict)]
    else:
        from cfgopt.loaders.yaml_loader import load_yaml

        src = load_yaml(doc)
        refs = [src.data.get("deepspeed")] if src.error is None and isinstance(src.data, dict) else []
    return any(_resolves_to(ref, path, json_path, from_cwd) for ref in refs)
