"""A conda environment.yml / environment.yaml: its `dependencies:` match specs read in PEP 440's terms
(`conda_pin`) and its `- pip:` list as the requirements file conda hands to pip (`conda_environment_pins`,
`conda_environment_requirements`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from cfgopt.text.patterns import lazy
from cfgopt.text.requirements.pip_files import line_pins, read_requirement_line, requirement_lines
from cfgopt.text.requirements.requirement import NAME, Pin, normalise
from cfgopt.text.requirements.versions import parse_spec

# --------------------------------------------------------------------------- conda environment.yml
# `conda env create` reads environment.yml's `dependencies:`: conda match specs, and a `- pip:` list that conda
# writes, one item a line, into a requirements file in the environment file's folder and hands to `pip install -U
# -r` (conda/env/installers/pip.py `_pip_install_via_requirements`): pip's lines, `-r` includes relative to that
# folder; pip runs after conda, so its pin of a package is the one that stays.
# A match spec (conda/models/match_spec.py `_parse_spec_str`; docs.conda.io/projects/conda/en/latest/user-guide/
# concepts/pkg-specs.html "Package match specifications"): `channel::name version build`, `#` starts a comment.
# `numpy=1.11` is fuzzy, conda's `1.11*` (1.11, 1.11.0, 1.11.18; not 1.110): PEP 440's `==1.11.*`; `numpy==1.11`
# and `numpy 1.11` are exact (1.11, 1.11.0); `numpy=1.11=build` names a build, and the version is exact; `*` is
# any; `,` is and; `>=1.*` is `>=1` (conda drops the `.*`); `|` (or) has no PEP 440 form and, as a
# `[version=...]` bracket, is read as unknown ("", as a bare name).
CONDA_NAMES = {"pytorch": "torch"}  # a conda package's name -> the distribution pip knows it as
_NOT_PACKAGES = frozenset({"python", "pip"})  # the interpreter and the installer, which every environment has
_CONDA_DEPENDENCIES = lazy(r"^dependencies[ \t]*:[ \t]*(?:#[^\r\n]*)?\r?$", re.MULTILINE)
_CONDA_PIP_KEY = lazy(r"""(["']?)pip\1[ \t]*:""")
_CONDA_SPEC = lazy(r"([^ \t=<>!~]+)([ \t=<>!~].*)?")  # match_spec.py step 6: the name, then version and build
_CONDA_BUILD_EQUALS = lazy(r"(?<=[^<>=!~,|])=")  # `1.2=build`: an `=` that ends a version, not an operator
_CONDA_NAME = lazy(NAME)
_CONDA_OPERATORS = ("==", "!=", "<=", ">=", "~=", "<", ">", "=")
_OPERATOR_CHARS = "<>=!~,|"


def _yaml_item(line: str, offset: int) -> tuple[str, int] | None:
    """A block sequence item's scalar (`- x`, `- "x"  # comment`) and where it starts; None for no item."""
    body = line.lstrip(" ")
    if not (body == "-" or body.startswith(("- ", "-\t"))):
        return None
    value = body[1:].lstrip(" \t")
    at = offset + len(line) - len(value)
    close = value.find(value[0], 1) if value[:1] in ('"', "'") else -1
    if close > 0 and not value[close + 1 :].split(" #", 1)[0].strip():  # a quoted scalar (a quoted key is no item)
        return value[1:close], at + 1
    return value.split(" #", 1)[0].rstrip(), at


def _yaml_mapping(text: str, item: tuple[str, int]) -> bool:
    """Is a block sequence item of `text` a mapping (`- pip: [a, b]`), not a string? Its unquoted text holds a
    `: ` or ends in `:` (a match spec never does: a channel's is `::name`)."""
    value, at = item
    quoted = text[at - 1 : at] in ("'", '"')
    return not quoted and (value.endswith(":") or ": " in value or ":\t" in value)


def conda_environment_items(text: str) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """environment.yml's `dependencies:` block list: the conda match specs and the `- pip:` list's lines, each as
    (text, offset in the file), in order. Not read: a flow list (`[a, b]`), a mapping item other than `pip:`, an
    item continued on the next lines (a plain scalar YAML folds: its text is not one line's), a file that has the
    key twice (PyYAML keeps the last, conda's ruamel.yaml refuses the file)."""
    key = _CONDA_DEPENDENCIES.search(text)
    if key is None or _CONDA_DEPENDENCIES.search(text, key.end()) is not None:
        return [], []
    conda: list[tuple[str, int]] = []
    pip: list[tuple[str, int]] = []
    offset = key.end() + 1
    indent = -1  # the items' indentation (YAML lets it be the key's own)
    in_pip = False
    last: list[tuple[str, int]] | None = None  # the list the last item went to, while a line may continue it
    for raw in text[offset:].split("\n"):
        line, here = raw.rstrip("\r"), offset
        offset += len(raw) + 1
        if not line.strip() or line.lstrip(" ").startswith("#"):
            continue
        level = len(line) - len(line.lstrip(" "))
        item = _yaml_item(line, here)
        if (indent < 0 and item is None) or level < indent or (level == indent and item is None):
            break  # no block list, or the next key
        indent = level if indent < 0 else indent
        if item is None and last:
            last.pop()  # a deeper line that is no item continues the scalar before it
        if item is None or not item[0]:
            last = None
            continue
        last = None
        if level == indent:
            in_pip = _CONDA_PIP_KEY.fullmatch(item[0]) is not None
            if not in_pip and not _yaml_mapping(text, item):
                conda.append(item)
                last = conda
        elif in_pip:
            pip.append(item)
            last = pip
    return conda, pip


def _conda_version(version: str) -> str:
    """A conda version spec (`1.11*`, `>=2.4,<2.6`, `2.5.1`) in PEP 440's words (`==1.11.*`, ...); "" for any,
    and for what PEP 440 cannot state (`|`) or is not read."""
    if not version or "|" in version or version == "*":
        return ""
    clauses: list[str] = []
    for clause in version.split(","):
        op = next((o for o in _CONDA_OPERATORS if clause.startswith(o)), "")
        bound = clause[len(op) :]
        wild = bound.endswith("*") or op == "="  # `=1.2` inside a spec: conda's startswith
        bound = bound.rstrip("*").rstrip(".")
        if op in ("", "=", "=="):
            clauses.append("==" + bound + (".*" if wild else ""))
        elif op == "!=":
            clauses.append("!=" + bound + (".*" if wild else ""))
        else:
            clauses.append(op + bound)  # an order: conda ignores a trailing `.*`
    spec = ",".join(clauses)
    try:
        parse_spec(spec)
    except ValueError:
        return ""
    return spec


def _conda_version_of(rest: str) -> str:
    """The conda version spec in a match spec's text after the name (match_spec.py `_parse_version_plus_build`,
    then its `=1.2` -> `1.2*`): `=1.2` -> `1.2*`, `=1.2=b` and `=1.2 b` -> `1.2`, `>=1 , <2 b` -> `>=1,<2`."""
    words: list[str] = []
    for word in rest.split():
        if words and words[-1][-1] not in _OPERATOR_CHARS and word[0] not in _OPERATOR_CHARS:
            break  # the build string
        words.append(word)
    joined = "".join(words)
    cut = _CONDA_BUILD_EQUALS.search(joined)
    version = joined[: cut.start()] if cut else joined
    build = cut is not None or len(words) < len(rest.split())
    tail = version[1:]
    if version.startswith("=") and not tail.startswith("=") and not any(c in tail for c in "=,|"):
        return tail if build or tail.endswith("*") else tail + "*"
    return version


def conda_pin(spec: str, offset: int = 0) -> Pin | None:
    """A conda match spec (`conda-forge::pytorch=2.5`, `numpy >=1.8,<2`) as a pin: the distribution as pip names
    it (`pytorch` -> torch), the version in PEP 440's words (`==2.5.*`), the spans of the text as written; None
    for no package (a URL or a package file, `python`, `pip`)."""
    text = spec.split("#", 1)[0].rstrip()
    if text.endswith((".tar.bz2", ".conda")):
        return None
    bracket = text.find("[")
    unread = bracket >= 0  # `name[version=...]`: the brackets override the version; not read
    text = text[:bracket] if unread else text
    body = text.rsplit(":", 2)[-1]  # `channel::name`, `channel/subdir::name`
    at = offset + len(text) - len(body)
    match = _CONDA_SPEC.fullmatch(body)
    if match is None or _CONDA_NAME.fullmatch(match.group(1)) is None:
        return None
    name = normalise(match.group(1))
    name = CONDA_NAMES.get(name, name)
    if name in _NOT_PACKAGES:
        return None
    rest = match.group(2) or ""
    version = "" if unread else _conda_version(_conda_version_of(rest))
    name_at, name_end = at + match.start(1), at + match.end(1)
    spec_at = name_end + len(rest) - len(rest.lstrip())
    spec_end = name_end + len(rest.rstrip())
    spec_at, spec_end = (spec_at, spec_end) if version else (name_at, name_end)
    return Pin(name, version, name_at, name_end, spec_at, spec_end)


def conda_environment_pins(text: str) -> tuple[list[Pin], list[tuple[str, int, int]]]:
    """Every pin of an environment.yml with its span in the file (the conda specs and the `- pip:` list's
    requirements, in order) and the package index URLs its pip lines name."""
    conda, pip = conda_environment_items(text)
    pins = [pin for item in conda if (pin := conda_pin(*item)) is not None]
    indexes: list[tuple[str, int, int]] = []
    for line, at in pip:
        read_requirement_line(line, at, pins, indexes)
    return sorted(pins, key=lambda p: p.name_start), indexes


def conda_environment_requirements(path: Path, text: str, read: Callable[[Path], str]) -> list[Pin]:
    """What an environment.yml installs: its pip lines' requirements first (the files their `-r` lines include
    too: pip installs after conda), then its conda specs; the pip pins' spans are of their lines."""
    conda, pip = conda_environment_items(text)
    pip_pins = line_pins(requirement_lines(path, "\n".join(line for line, _ in pip), read))
    return pip_pins + [pin for item in conda if (pin := conda_pin(*item)) is not None]
