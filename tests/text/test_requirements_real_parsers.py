"""The setup.cfg and environment.yml readers (cfgopt/text/requirements/) against the real parsers: seeded
generated files of the shapes users write, read by cfgopt and by setuptools 84.2 (`read_configuration`, then
`_reqs.parse` as its build does) or PyYAML's `safe_load` (conda's structure) with `packaging` (pip's lines).
cfgopt reads the same requirements, or none where the real reader refuses the file; never a wrong pin, and every
span covers the text it names. The named tests below each keep one disagreement these comparisons found."""

from __future__ import annotations

import random
import warnings
from pathlib import Path

import pytest
import yaml
from packaging.requirements import InvalidRequirement, Requirement
from requirement_reads import Read, first_failures, pin_read, requirement_read
from sampling import full
from setuptools import _reqs
from setuptools.config.setupcfg import read_configuration

from cfgopt.text.requirements.conda import CONDA_NAMES, conda_environment_items, conda_environment_pins
from cfgopt.text.requirements.pip_files import requirement_of
from cfgopt.text.requirements.requirement import Pin, normalise
from cfgopt.text.requirements.setup_cfg import setup_cfg_pins

# seeds per reader: every shape below comes up many times in the default sample; --full runs 2,000
CASES = 2000 if full() else 250

# --------------------------------------------------------------------------- setup.cfg: a seeded generator
NAMES = ["torch", "flash-attn", "Flash_Attn", "deepspeed", "transformers", "Liger.Kernel", "peft", "numpy"]
SPECS = ["", ">=2.4", "==2.5.1", " >= 2.4 , < 2.6", "~=0.9.5", "!=1.0", "==2.5.*", "<3,>=2", "==2.5.1+cu121"]
MARKERS = ["", ' ; python_version >= "3.9"', ';sys_platform=="linux"', " ; extra == 'gpu' and os_name != \"nt\""]
EXTRAS = ["", "[autotuning]", "[torch, sentencepiece]"]
URLS = ["https://example.com/pkg-1.0-py3-none-any.whl", "git+https://github.com/o/r.git@v1"]


def _requirement(r: random.Random) -> str:
    name, kind = r.choice(NAMES), r.random()
    if kind < 0.12:
        return f"{name}{r.choice(EXTRAS)} @ {r.choice(URLS)}" + r.choice(["", ' ; python_version >= "3.9"'])
    if kind < 0.16:
        return f"{name} (>=1.0)"
    return f"{name}{r.choice(EXTRAS)}{r.choice(SPECS)}{r.choice(MARKERS)}"


def _list_value(r: random.Random, indent: int) -> str:
    """A requirement list after its key: on one line (`;`), a `file:`, or one a line with blank lines, comment
    lines (`#`, `;`, at any indentation) and ` #` comments between."""
    reqs = [_requirement(r) for _ in range(r.randint(0, 4))]
    shape = r.random()
    if shape < 0.25 and reqs:
        return " " + r.choice([";", "; ", " ;"]).join(reqs) + r.choice(["", " # trailing"]) + "\n"
    if shape < 0.3:
        return " file: requirements.txt\n"
    out = ("" if r.random() < 0.7 or not reqs else " " + reqs.pop(0)) + "\n"
    for req in reqs:
        out += "\n" if r.random() < 0.2 else ""
        if r.random() < 0.2:
            out += " " * r.choice([0, indent + 2]) + r.choice(["# a note", "; a note", "#", "#torch==9.9"]) + "\n"
        out += " " * (indent + r.choice([1, 2, 4])) + req + r.choice(["", "", " # inline", "  #cuda"]) + "\n"
    return out


def _section(r: random.Random, name: str) -> str:
    """A section's options; a key indented under the one before continues its value, as configparser reads it."""
    if name == "options":
        keys = [(r.choice(["install_requires", "install_requires", "install-requires", "Install_Requires"]), True)]
        keys = ([("python_requires", False)] if r.random() < 0.5 else []) + keys
        keys += [("setup_requires", True)] if r.random() < 0.3 else []
    elif name == "options.extras_require":
        keys = [(extra, True) for extra in r.sample(["deepspeed", "flash", "dev", "Liger-Kernel"], r.randint(1, 3))]
    else:
        keys = [("name", False), ("description", False)]
    out = ""
    for key, is_list in keys:
        indent, sep = r.choice([0, 0, 0, 0, 2]), r.choice(["=", " =", " = ", ":", " : "])
        if is_list:
            out += " " * indent + key + sep.rstrip() + _list_value(r, indent)
            continue
        descriptions = ["a job"] * 8 + ["100% faster", "50%% off", "uses %(name)s", "uses %(nme)s"]
        value = {"python_requires": ">=3.9", "name": "job", "description": r.choice(descriptions)}[key]
        out += " " * indent + key + sep + value + "\n"
    return out


def _setup_cfg(r: random.Random) -> str:
    sections = ["metadata", "options", "options.extras_require"] + (["tool:pytest"] if r.random() < 0.2 else [])
    r.shuffle(sections)
    sections += ["options"] if r.random() < 0.05 else []  # a section twice: configparser refuses the file
    out = "# top\n" if r.random() < 0.3 else ""
    if r.random() < 0.1:
        out += "[DEFAULT]\ndeepspeed = deepspeed>=0.15\n"  # every section's option: an extra of its own
    for name in sections:
        out += f"[{name}]" + r.choice(["", "", " # c"]) + "\n" + _section(r, name) + r.choice(["", "\n"])
    return out.replace("\n", r.choice(["\n"] * 7 + ["\r\n", "\r"]))


# --------------------------------------------------------------------------- setup.cfg: the real reader
def _setuptools_reads(path: Path, text: str) -> list[Read] | None:
    """The requirements setuptools reads (install_requires, then every extra), each item as its build parses it
    (`_reqs.parse_strings`, `packaging`; an item it cannot parse is none); None where reading the file raises."""
    path.write_bytes(text.encode())
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            options = read_configuration(path).get("options", {})
    except Exception:  # noqa: BLE001 (configparser's and setuptools' errors: the file installs nothing)
        return None
    lists = [options.get("install_requires", []), *options.get("extras_require", {}).values()]
    found: list[Read] = []
    for items in lists:
        for item in _reqs.parse_strings(list(items)):
            try:
                found.append(requirement_read(Requirement(item)))
            except InvalidRequirement:
                continue
    return sorted(found)


def _spans_hold(text: str, pins: list[Pin]) -> bool:
    """Each pin's spans cover its name and its specifier (or URL) as written in the file."""
    for pin in pins:
        spec = text[pin.spec_start : pin.spec_end]
        if normalise(text[pin.name_start : pin.name_end]) != pin.name:
            return False
        if spec != (pin.spec.removeprefix("@ ") if pin.spec else text[pin.name_start : pin.name_end]):
            return False
    return True


def test_setup_cfg_pins_are_what_setuptools_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Generated setup.cfg files: cfgopt's pins are setuptools' requirements (a list value holding `%`, which
    interpolation rewrites, is not read: its pins are then a part of them); none where setuptools raises."""
    monkeypatch.delenv("SETUPTOOLS_ENFORCE_DEPRECATION", raising=False)  # dashes and capitals: warnings only
    path = tmp_path / "setup.cfg"

    def check(seed: int) -> str:
        text = _setup_cfg(random.Random(seed))
        pins = setup_cfg_pins(text)
        mine, real = sorted(pin_read(pin) for pin in pins), _setuptools_reads(path, text)
        rewritten = "%" in text.split("[options]", 1)[-1]
        agrees = mine == (real or []) or (rewritten and real is not None and set(mine) <= set(real))
        if not agrees or not _spans_hold(text, pins):
            return f"seed {seed}: cfgopt {mine}, setuptools {real}\n{text}"
        return ""

    assert first_failures(range(CASES), check) == []


def test_setup_cfg_install_requires_alone_is_what_setuptools_installs(tmp_path: Path) -> None:
    """`extras=False` (the job's environment): install_requires only, as setuptools reads it."""
    path = tmp_path / "setup.cfg"
    for seed in range(0, CASES, 5):
        text = _setup_cfg(random.Random(seed))
        mine = sorted(pin_read(pin) for pin in setup_cfg_pins(text, extras=False))
        path.write_bytes(text.encode())
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                items = read_configuration(path).get("options", {}).get("install_requires", [])
        except Exception:  # noqa: BLE001 (any error of setuptools: no pins)
            assert mine == [], text
            continue
        if "%" not in text:
            real = []
            for item in _reqs.parse_strings(list(items)):
                try:
                    real.append(requirement_read(Requirement(item)))
                except InvalidRequirement:
                    continue
            assert mine == sorted(real), text


# --------------------------------------------------------------------------- environment.yml: a seeded generator
CONDA = [
    "python=3.10",
    "pytorch=2.5.1",
    "pytorch::pytorch>=2.4",
    "conda-forge::numpy >=1.8,<2",
    "cudatoolkit 11.8.*",
    "pip",
    "numpy=1.11=py310_0",
    "deepspeed",
    "transformers==4.46.0",
    "flash-attn[version='>=2.6']",
]
PIP = [
    "torch==2.5.1+cu121",
    "deepspeed[autotuning]>=0.15",
    "llamafactory @ git+https://github.com/hiyouga/LLaMA-Factory.git",
    "-r requirements.txt",
    "--extra-index-url https://download.pytorch.org/whl/cu121",
    "liger-kernel>=0.5 ; python_version >= '3.9'",
    "peft",
    "transformers>=4.46,<4.50",
]


def _scalar(r: random.Random, text: str) -> str:
    quote = r.random()
    if quote < 0.15 and "'" not in text:
        return f"'{text}'"
    if quote < 0.3 and '"' not in text:
        return f'"{text}"'
    return text


def _comment(r: random.Random) -> str:
    return r.choice(["", "", "", "  # note", " #x"])


def _pip_item(r: random.Random, ind: str, pip: list[str], nl: str) -> list[str]:
    if r.random() < 0.1:  # a flow list: not read
        return [f"{ind}- pip: [{', '.join(p for p in pip if ',' not in p and '[' not in p)}]"]
    sub = ind + r.choice(["  ", "    ", " ", "   "])
    lines = [f"{ind}- {'pip' if r.random() < 0.8 else _scalar(r, 'pip')}:{_comment(r)}"]
    for item in pip:
        lines += [sub + "# a comment"] if r.random() < 0.15 else []
        lines += [""] if r.random() < 0.1 else []
        lines.append(f"{sub}- {_scalar(r, item)}{_comment(r)}")
    return lines


def _conda_item(r: random.Random, ind: str, spec: str, nl: str) -> list[str]:
    shape = r.random()
    if shape < 0.08 and " " in spec:  # a plain scalar folded over two lines: not read
        name, rest = spec.split(" ", 1)
        return [f"{ind}- {name}", f"{ind}    {rest}"]
    if shape < 0.13:  # a mapping item: no conda spec
        return [f"{ind}- other:", f"{ind}    - {spec}"]
    return [ind + "# commented: - torch=1.0"] * (r.random() < 0.1) + [f"{ind}- {_scalar(r, spec)}{_comment(r)}"]


def _dependencies(r: random.Random, nl: str) -> str:
    ind = r.choice(["", "  ", "    "])
    conda, pip = r.sample(CONDA, r.randint(0, 5)), r.sample(PIP, r.randint(0, 4))
    if r.random() < 0.08:
        return "dependencies: [" + ", ".join(c for c in conda if "," not in c and "[" not in c) + "]" + nl
    pip_at = r.randint(0, len(conda))
    lines: list[str] = []
    for i, spec in enumerate([*conda, None]):
        if i == pip_at and (pip or r.random() < 0.2):
            lines += _pip_item(r, ind, pip, nl)
        if spec is not None:
            lines += _conda_item(r, ind, spec, nl)
    return "dependencies:" + _comment(r) + nl + nl.join(lines) + nl


def _environment_yml(r: random.Random) -> str:
    nl = "\r\n" if r.random() < 0.2 else "\n"
    head = ["name: job"] * (r.random() < 0.8) + [f"channels:{nl}  - pytorch{nl}  - conda-forge"] * (r.random() < 0.6)
    tail = ["prefix: /opt/conda/envs/job"] * (r.random() < 0.3) + [f"variables:{nl}  CUDA_HOME: /cuda"] * (
        r.random() < 0.2
    )
    before = head[: r.randint(0, len(head))]
    after = head[len(before) :] + tail
    r.shuffle(after)
    text = "".join(k + nl for k in before) + _dependencies(r, nl) + "".join(k + nl for k in after)
    text += f"dependencies:{nl}  - deepspeed==0.1{nl}" if r.random() < 0.05 else ""  # the key twice: not read
    return ("---" + nl if r.random() < 0.05 else "") + text


def _read_in_order(mine: list[str], real: list[str], text: str) -> bool:
    """cfgopt's entries are the YAML's, in order; an entry it leaves out is one not written on one line (folded),
    or it reads none of the list (a shape it does not read)."""
    rest = iter(real)
    in_order = all(any(entry == other for other in rest) for entry in mine)
    return mine == [] or (in_order and all(entry in mine or entry not in text for entry in real))


def test_environment_yml_entries_are_what_yaml_reads() -> None:
    """Generated environment.yml files: the conda entries and the `- pip:` lines cfgopt reads are the strings
    `safe_load(text)["dependencies"]` holds, spans on their text; nothing where it reads another structure."""

    def check(seed: int) -> str:
        text = _environment_yml(random.Random(seed))
        try:
            dependencies = yaml.safe_load(text)["dependencies"] or []
        except yaml.YAMLError:
            return ""  # pip items indented less than their key: no YAML, no comparison
        conda, pip = conda_environment_items(text)
        real_conda = [d for d in dependencies if isinstance(d, str)]
        real_pip = [p for d in dependencies if isinstance(d, dict) for p in d.get("pip") or []]
        mine_conda, mine_pip = [c for c, _ in conda], [p for p, _ in pip]
        spans = all(text[at : at + len(entry)] == entry for entry, at in conda + pip)
        if not (_read_in_order(mine_conda, real_conda, text) and _read_in_order(mine_pip, real_pip, text) and spans):
            return f"seed {seed}: cfgopt {mine_conda} {mine_pip}, YAML {real_conda} {real_pip}\n{text}"
        return ""

    assert first_failures(range(CASES), check) == []


def _written_name(text: str, pin: Pin) -> str:
    return normalise(text[pin.name_start : pin.name_end])


def test_environment_yml_pip_pins_are_what_packaging_reads() -> None:
    """Each `- pip:` line packaging parses gives the pin cfgopt reads (name, specifier or URL, extras), spans on
    the file's text; a line it does not parse (an option, `-r`) gives none. A conda pin's name span is the conda
    name (`pytorch` for torch); its specifier is conda's, in PEP 440's words, so its span is the text it reads."""

    def check(seed: int) -> str:
        text = _environment_yml(random.Random(seed))
        pins, _ = conda_environment_pins(text)
        _, pip = conda_environment_items(text)
        by_line = {at: pin for pin in pins for line, at in pip if at <= pin.name_start < at + len(line)}
        for line, at in pip:
            try:
                real: Read | None = requirement_read(Requirement(requirement_of(line)))
            except InvalidRequirement:
                real = None
            mine = pin_read(by_line[at]) if at in by_line else None
            if mine != real:
                return f"seed {seed}: {line!r}: cfgopt {mine}, packaging {real}"
        conda_names = all(CONDA_NAMES.get(n, n) == pin.name for pin in pins if (n := _written_name(text, pin)))
        return "" if _spans_hold(text, list(by_line.values())) and conda_names else f"seed {seed}: spans\n{text}"

    assert first_failures(range(CASES), check) == []


# --------------------------------------------------------------------------- each disagreement found, kept
def _read(text: str) -> list[tuple[str, str]]:
    return [(pin.name, pin.spec) for pin in setup_cfg_pins(text)]


@pytest.mark.parametrize(
    "text",
    [
        "[options]\ninstall_requires = torch==2.5.1\n[options]\npython_requires = >=3.9\n",  # a section twice
        "[options]\ninstall_requires = torch==2.5.1\ninstall_requires = torch==2.4.0\n",  # a key twice
        "name = job\n[options]\ninstall_requires = torch==2.5.1\n",  # an option before any section
        "[options]\ninstall_requires =\ntorch\n[options.extras_require]\ngpu = deepspeed\n",  # no `=`: no option
        "[options.extras_require]\n= torch==2.5.1\n",  # an option without a key
    ],
)
def test_a_setup_cfg_configparser_refuses_states_no_pins(text: str) -> None:
    """configparser (strict) raises on these: `pip install .` fails, and cfgopt reads no pin (it read some)."""
    assert _read(text) == []


def test_a_percent_that_interpolation_cannot_read_refuses_the_setup_cfg() -> None:
    """setuptools reads every option through BasicInterpolation: `100% faster` anywhere raises; `%%` and a
    `%(key)s` the section defines do not; a list value holding `%` (rewritten) is not read as written."""
    pins = "[options]\ninstall_requires = torch==2.5.1\n"
    assert _read("[metadata]\ndescription = 100% faster\n" + pins) == []
    assert _read("[metadata]\nname = job\ndescription = %(nme)s\n" + pins) == []
    assert _read("[metadata]\nname = job\ndescription = 50%% off, %(name)s\n" + pins) == [("torch", "==2.5.1")]
    assert _read("[options]\ninstall_requires = pkg @ https://host/a%%2Bb.whl\n") == []


def test_a_setup_cfg_item_packaging_cannot_parse_is_no_pin() -> None:
    """An option indented under the list continues it (`setup_requires = numpy>=2` is an item, no requirement),
    and `python_version >= "3.9"` on a line of its own is none: neither is a pin (they were `setup_requires`,
    `python_version`)."""
    text = '[options]\ninstall_requires =\n    torch>=2.4\n  setup_requires = numpy>=2\n    python_version >= "3.9"\n'
    assert _read(text) == [("torch", ">=2.4")]


def test_a_one_line_list_split_from_its_marker_refuses_the_setup_cfg() -> None:
    """`a; marker` on one line is split at `;`, and setuptools raises when the second part starts with a marker
    variable and is no requirement (config/setupcfg.py `_warn_accidental_env_marker_misconfig`)."""
    assert _read('[options]\ninstall_requires = torch>=2.4; python_version>"3.8"\n') == []
    refused_by_an_extra = '[options]\ninstall_requires = peft\n[options.extras_require]\ngpu = a; python_version>"3"\n'
    assert setup_cfg_pins(refused_by_an_extra, extras=False) == []  # the job's own list too
    assert _read("[options]\ninstall_requires = torch>=2.4; peft\n") == [("torch", ">=2.4"), ("peft", "")]


def test_a_setup_cfg_specifier_in_brackets_is_read() -> None:
    """PEP 508's `name (>=1.0)`, which packaging reads, is a pin (it was none), its span inside the brackets."""
    text = "[options]\ninstall_requires =\n    torch (>=2.4,<2.6)\n"
    (pin,) = setup_cfg_pins(text)
    assert (pin.name, pin.spec, text[pin.spec_start : pin.spec_end]) == ("torch", ">=2.4,<2.6", ">=2.4,<2.6")


def test_a_setup_cfg_python_requires_that_is_no_specifier_refuses_the_file() -> None:
    """setuptools parses python_requires (`SpecifierSet`): a key indented under it continues it, and raises."""
    text = (
        "[options]\npython_requires = >=3.9\n  install_requires = torch==2.5.1\n[options.extras_require]\ngpu = peft\n"
    )
    assert _read(text) == []  # the extra was read


def test_a_setup_cfg_with_cr_line_ends_is_read_as_setuptools_reads_it() -> None:
    """The file is opened as text: a lone `\\r` ends a line (the list was one line, `torch==2.5.1\\r deepspeed`)."""
    text = "[options]\rinstall_requires =\r    torch==2.5.1\r    deepspeed\r"
    assert _read(text) == [("torch", "==2.5.1"), ("deepspeed", "")]


def test_a_setup_cfg_default_section_and_key_spellings_are_read_as_setuptools_reads_them() -> None:
    """[DEFAULT]'s options are every section's (an extra of [options.extras_require] too); of two spellings of
    install_requires, the last read wins (it read both)."""
    text = (
        "[DEFAULT]\ngpu = deepspeed>=0.15\n[options]\nInstall_Requires = torch==1.0\ninstall-requires = torch==2.5.1\n"
    )
    assert _read(text + "[options.extras_require]\n") == [("deepspeed", ">=0.15"), ("torch", "==2.5.1")]
    assert _read(text) == [("torch", "==2.5.1")]


def test_an_environment_yml_mapping_item_is_no_conda_spec() -> None:
    """`- pip: [a, b]` (a flow list) is a mapping: neither a conda spec nor read (it was the spec `pip: [a, b]`)."""
    assert conda_environment_items("dependencies:\n  - numpy\n  - pip: [peft, trl]\n") == ([("numpy", 18)], [])


def test_an_environment_yml_item_folded_over_two_lines_is_not_read() -> None:
    """YAML folds `- numpy` and `  >=1.8,<2` into `numpy >=1.8,<2`: the item is not one line, so not read (it
    was `numpy`, any release)."""
    text = "dependencies:\n  - numpy\n      >=1.8,<2\n  - pip:\n    - peft\n      ==0.1\n    - trl\n"
    conda, pip = conda_environment_items(text)
    assert (conda, [line for line, _ in pip]) == ([], ["trl"])


def test_an_environment_yml_with_dependencies_twice_is_not_read() -> None:
    """PyYAML keeps the last `dependencies:`, conda's ruamel.yaml refuses the file: cfgopt reads none (it read the
    first)."""
    assert conda_environment_items("dependencies:\n  - numpy=1.11\ndependencies:\n  - numpy=2.0\n") == ([], [])
