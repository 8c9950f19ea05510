"""The requirement reader's str-method shortcuts (cfgopt/text/requirements/requirement.py) answer as the patterns
they replace or spare: the patterns are kept here as the oracle, and each shortcut is compared with its pattern
over an exhaustive table of short texts and over generated ones (issue 45: a lint that reads a pyproject.toml
passes every string of it through the reader, and compiling these patterns was a millisecond of its start-up)."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from cfgopt.text.requirements import manifests, requirement, versions
from cfgopt.text.requirements.requirement import Pin, extras_of, is_specifier, normalise, pep508_requirement
from cfgopt.text.user_text import integer

# the patterns as they were (requirement.py before the shortcuts)
NAME = r"[A-Za-z0-9][A-Za-z0-9._-]*"
OLD_SEPARATORS = re.compile(r"[-_.]+")
OLD_HEAD = re.compile(rf"[ \t]*({NAME})[ \t]*(?:\[([^\]]*)\][ \t]*)?")
OLD_IDENTIFIER = re.compile(rf"{NAME}")
SPEC_CLAUSE = re.compile(requirement._SPEC_CLAUSE.pattern, requirement._SPEC_CLAUSE.flags)
OLD_DIGITS = re.compile(r"[0-9]*", re.ASCII)
OLD_CLAUSE = re.compile(r"^(===|==|!=|~=|>=|<=|>|<|\^|~)?\s*v?([0-9][0-9A-Za-z.*+!-]*)$")
OLD_EXACT = re.compile(r"^(?:===?)?\s*v?(\d+(?:\.\d+)*)(?:\.post\d+)?(?:\+[\w.]+)?$")
OLD_LOCAL = re.compile(r"\+(cu\d+|rocm[\d.]+)", re.IGNORECASE)
OLD_INDEX = re.compile(r"download\.pytorch\.org/whl/(?:nightly/|test/)?(cu\d+|rocm[\d.]+)", re.IGNORECASE)

# the characters the shapes turn on, and a few that look like them (Unicode digits and blanks, `ı`, `K`)
NAME_ALPHABET = "aZ09._- \t[]@,;()\n\u0663\u00e9\u212a"
SPEC_ALPHABET = "<>=!~ 0129.*vV!+-abrcdepostl\t\n\u0663\u00b2\u3000"
SHORT = 4  # every text of up to this many characters from the alphabet


def _texts(alphabet: str, most: int) -> list[str]:
    return ["".join(t) for n in range(most + 1) for t in itertools.product(alphabet, repeat=n)]


def _old_identifier(text: str) -> bool:
    return OLD_IDENTIFIER.fullmatch(text) is not None and text[-1].isalnum()


def _old_head(text: str) -> tuple[int, int, str | None, int] | None:
    m = OLD_HEAD.match(text)
    return (m.start(1), m.end(1), m.group(2), m.end()) if m else None


def _same_name_shapes(text: str) -> None:
    assert normalise(text) == OLD_SEPARATORS.sub("_", text).lower(), text
    assert requirement._identifier(text) == _old_identifier(text), text
    assert requirement._pep508_head(text) == _old_head(text), text


def _same_clause(text: str) -> None:
    assert requirement._clause(text) == (SPEC_CLAUSE.fullmatch(text) is not None), text


def test_name_shapes_exhaustively() -> None:
    for text in _texts(NAME_ALPHABET, SHORT):
        _same_name_shapes(text)


@settings(max_examples=300)
@given(st.text(alphabet=NAME_ALPHABET, max_size=24) | st.text(max_size=12))
def test_name_shapes_on_generated_texts(text: str) -> None:
    _same_name_shapes(text)


def test_clauses_exhaustively() -> None:
    for text in _texts(SPEC_ALPHABET, SHORT):
        _same_clause(text)


@settings(max_examples=300)
@given(
    st.sampled_from(["", "==", "!=", "<=", ">=", "~=", "<", ">", "===", "=", "~", "^"]),
    st.sampled_from(["", " ", "\t", "\n", "\u3000"]),
    st.text(alphabet=SPEC_ALPHABET, max_size=14),
)
def test_clauses_on_generated_texts(op: str, blank: str, rest: str) -> None:
    _same_clause(op + blank + rest)


def test_plain_releases_need_no_pattern() -> None:
    """The clauses of an ordinary manifest are answered by the shortcut (the pattern stays uncompiled for them)."""
    for clause in (">=68", ">=2.5", "<3", "==0.9.5", "!= 1.0", "~=0.9.5", "> 1"):
        assert requirement._plain_clause(clause)
    for clause in ("~=1", "==2.5.*", ">=1.0rc1", "===x", "==v1", ">=1.0+local", "and auto-fix", ""):
        assert not requirement._plain_clause(clause)


def test_the_reader_reads_as_before() -> None:
    """Whole requirements through the reordered checks (the marker now after the specifier): the same pins."""
    assert pep508_requirement('tomli>=1.1; python_version < "3.11"') is not None
    assert pep508_requirement("pydantic>=2.5,<3").spec == ">=2.5,<3"
    assert pep508_requirement("oracle: needs the real parsers; skipped when they are not installed") is None
    assert pep508_requirement("torch>=2.1; not a marker") is None
    assert pep508_requirement("  Liger-Kernel [ triton ] (>=0.5)").extras == ("triton",)
    assert is_specifier(">= 2.4 , < 2.6,") and not is_specifier(">=2.4,,<2.6")


# --------------------------------------------------------------------------- versions.py
VERSION_ALPHABET = "=<>!~^ 019.*v+-a\n\u0663"


def _old_parse_spec(spec: str) -> list[tuple[str, str]] | None:
    clauses = []
    for raw in spec.replace(" ", "").split(","):
        if raw in ("", "*"):
            continue
        match = OLD_CLAUSE.match(raw)
        if match is None:
            return None
        clauses.append((match.group(1) or "==", match.group(2)))
    return clauses


def _new_parse_spec(spec: str) -> list[tuple[str, str]] | None:
    try:
        return versions.parse_spec(spec)
    except ValueError:
        return None


def _old_platform(text: str) -> str:
    found = OLD_LOCAL.search(text) or OLD_INDEX.search(text)
    return "" if found is None else "rocm" if found.group(1).lower().startswith("rocm") else "cuda"


def _same_versions(text: str) -> None:
    old_key = tuple(integer(OLD_DIGITS.match(part).group()) or 0 for part in text.split("."))  # type: ignore[union-attr]
    assert versions.version_key(text) == old_key, text
    assert _new_parse_spec(text) == _old_parse_spec(text), text
    old_exact = OLD_EXACT.match(text.strip())
    assert versions.exact_version(text) == (old_exact.group(1) if old_exact else None), text
    assert versions.platform_of_build(text) == _old_platform(text), text


def test_version_shapes_exhaustively() -> None:
    for text in _texts(VERSION_ALPHABET, SHORT):
        _same_versions(text)


@settings(max_examples=300)
@given(
    st.sampled_from(["", "==", "===", ">=", "~", "^", " == ", "v", "torch==2.5.1"]),
    st.text(alphabet=VERSION_ALPHABET, max_size=12),
    st.sampled_from(["", "+cu121", "+ROCM6.2", "+Cu", " download.pytorch.org/whl/rocm6.2", "/WHL/"]),
)
def test_version_shapes_on_generated_texts(op: str, rest: str, local: str) -> None:
    _same_versions(op + rest + local)


# --------------------------------------------------------------------------- manifests.py (pyproject.toml, setup.py)
OLD_TABLE = re.compile(r"^[ \t]*\[([^\]\n]*)\][ \t]*$", re.MULTILINE)
OLD_DEPENDENCIES = re.compile(r"^[ \t]*dependencies[ \t]*=[ \t]*\[", re.MULTILINE)
OLD_ARRAY_TOKENS = re.compile(manifests._ARRAY_TOKENS.pattern, manifests._ARRAY_TOKENS.flags)
OLD_POETRY = re.compile(manifests._POETRY.pattern, manifests._POETRY.flags)


def _old_project_dependencies(text: str) -> list[Pin] | None:
    text = manifests.blank_comments(text)
    tables = list(OLD_TABLE.finditer(text))
    project = next((i for i, table in enumerate(tables) if table.group(1).strip() == "project"), None)
    if project is None:
        return None
    end = tables[project + 1].start() if project + 1 < len(tables) else len(text)
    key = OLD_DEPENDENCIES.search(text, tables[project].end(), end)
    if key is None:
        return None
    pins = []
    for m in OLD_ARRAY_TOKENS.finditer(text, key.end()):
        if m.group() == "]":
            break
        found = manifests._string(m)
        if found is not None and (pin := pep508_requirement(*found)) is not None:
            pins.append(pin)
    return pins


def _old_poetry_pins(text: str, names: frozenset[str], syntax: str) -> list[Pin]:
    text = manifests.blank_comments(text, syntax)
    tables = list(OLD_TABLE.finditer(text)) if syntax == "toml" else []
    pins = []
    for m in OLD_POETRY.finditer(text):
        key, group = manifests._poetry_groups(m)
        name = normalise(m.group(key))
        table = next((t.group(1).strip() for t in reversed(tables) if t.start() < m.start()), None)
        if name in names and (syntax != "toml" or (table or "").endswith("dependencies")):
            pins.append(Pin(name, m.group(group).strip(), m.start(key), m.end(key), m.start(group), m.end(group)))
    return pins


def _old_poetry_dependencies(text: str) -> list[Pin] | None:
    text = manifests.blank_comments(text)
    tables = list(OLD_TABLE.finditer(text))
    index = next((i for i, t in enumerate(tables) if t.group(1).strip() == "tool.poetry.dependencies"), None)
    if index is None:
        return None
    end = tables[index + 1].start() if index + 1 < len(tables) else len(text)
    pins = []
    for m in OLD_POETRY.finditer(text, tables[index].end(), end):
        key, group = manifests._poetry_groups(m)
        name = normalise(m.group(key))
        if name != "python":
            line_end = text.find("\n", m.start())
            listed = manifests._POETRY_EXTRAS.search(text[m.start() : line_end if line_end >= 0 else None])
            extras = extras_of(",".join(manifests._QUOTED_WORDS.findall(listed.group(1)))) if listed else ()
            spec = "" if m.group(group).strip() == "*" else m.group(group).strip()
            pins.append(Pin(name, spec, m.start(key), m.end(key), m.start(group), m.end(group), extras))
    return pins


TOML_FRAGMENTS = [
    *("[project]", "[ project ] ", "[tool.poetry.dependencies]", "[project.optional-dependencies]", "[[package]]"),
    *("[x]y", "[a\r", "dependencies = [", "dependencies=[", "  dependencies\t= [", "dependencies = 1", "]", "["),
    *('"torch>=2.1"', "'peft==0.12'", '"deepspeed==0.16.4",', '"""', "'''", '"a # b"', "# c", '"x', "'y", "\\"),
    *('deepspeed = "==0.16"', "'llamafactory' = '0.9.5'", 'DeepSpeed = { version = ">=0.15", extras = ["a"] }'),
    *('"llama-factory" = "*"', "x = 1", "torch = {path = 'x'}", "=", ",", " ", "\t", "\n", "\n", "\r\n", "é"),
    *('"Llama.Factory [metrics] >= 0.9"', '"DEEP--SPEED<1"', '"deepspeedx>1"', '"my-torch==2"', '"torch @ x"'),
]
NAMED = frozenset({"deepspeed", "llamafactory", "llama_factory", "torch"})


def _same_manifests(text: str) -> None:
    assert manifests.project_dependencies(text) == _old_project_dependencies(text), text
    for syntax in ("toml", "python"):
        assert manifests.poetry_pins(text, NAMED, syntax) == _old_poetry_pins(text, NAMED, syntax), (syntax, text)
    assert manifests.poetry_dependencies(text) == _old_poetry_dependencies(text), text
    for syntax in ("toml", "python"):  # `naming` parses only the strings that can name one: the same pins
        every = manifests.string_pins(text, syntax)
        assert manifests.string_pins(text, syntax, NAMED) == [p for p in every if p.name in NAMED], (syntax, text)
    blanked = manifests.blank_comments(text)
    assert manifests._tables(blanked) == [(m.start(), m.end(), m.group(1)) for m in OLD_TABLE.finditer(blanked)]


@settings(max_examples=500)
@given(st.lists(st.sampled_from(TOML_FRAGMENTS), max_size=14).map("".join))
def test_manifests_read_as_by_their_patterns(text: str) -> None:
    _same_manifests(text)


def test_the_repositorys_own_pyproject_reads_as_before() -> None:
    text = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text(encoding="utf-8")
    _same_manifests(text)
    assert [p.name for p in manifests.project_dependencies(text) or []] == ["pydantic", "pyyaml"]
    # a key inside a multi-line string, and a `#` after it that is no comment there
    for inner in ('["a # ]", "b"]', '[ # "c", "d" ]', '["e" # ] "f" ]'):
        _same_manifests(f'[project]\nx = """\ndependencies = {inner}\n"""\n')
