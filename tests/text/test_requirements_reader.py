"""The one requirement reader (cfgopt/text/requirements/): every consumer (the pins that choose the release, the
job's environment, the linted requirement files) reads a file the same way, so they cannot disagree."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rule_cases import run_cli

from cfgopt.environment import pins
from cfgopt.environment.stated import fa2_refusal, read_packages
from cfgopt.knowledge.targets import TARGETS
from cfgopt.text.requirements.conda import conda_environment_items, conda_pin
from cfgopt.text.requirements.files import requirement_pins
from cfgopt.text.requirements.manifests import project_dependencies
from cfgopt.text.requirements.requirement import normalise, parse_requirement
from cfgopt.text.requirements.setup_cfg import setup_cfg_pins
from cfgopt.text.requirements.versions import pip_version, reaches, spec_admits, version_key

TRAIN = """model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct
stage: sft
do_train: true
finetuning_type: lora
lora_target: all
dataset: alpaca_en_demo
template: llama3
output_dir: saves/lora
bf16: true
"""
ONE_LINE = '[project]\nname = "job"\ndependencies = ["llamafactory==0.9.4", "liger-kernel>=0.5"]\n'
SEVERAL_LINES = """[project]
name = "job"
dependencies = [
    "llamafactory==0.9.4",  # the release
    "liger-kernel>=0.5",
]
"""
# arrays before `dependencies` in the table, the closing `]` after the last string, a table after it
WITH_ARRAYS = (
    '[project]\nname = "job"\nkeywords = ["llm", "lora"]\nauthors = [{ name = "A" }]\n'
    'dependencies = [\n    "llamafactory==0.9.4",\n    "liger-kernel>=0.5"]\n\n[project.optional-dependencies]\n'
    'dev = ["pytest"]\n'
)


def _settings(tmp_path: Path, pyproject: str) -> tuple[str, str, str]:
    """The release judged, the environment and the JSON findings' environment of a repository's config."""
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "pyproject.toml").write_text(pyproject)
    (repo / "train.yaml").write_text(TRAIN)
    _, out, _ = run_cli(["lint", "--show-settings", str(repo / "train.yaml")])
    version = next(line for line in out.splitlines() if line.startswith("llamafactory-version"))
    environment = next(line for line in out.splitlines() if line.startswith("# environment:"))
    _, report, _ = run_cli(["lint", "--format", "json", str(repo / "train.yaml")])
    judged = {d.get("environment") for d in json.loads(report)["diagnostics"]}
    return version, environment.replace(str(repo) + "/", ""), str(sorted(map(str, judged)))


@pytest.mark.parametrize("other", [SEVERAL_LINES, WITH_ARRAYS], ids=["several-lines", "arrays-before"])
def test_one_line_dependencies_give_the_same_release_and_environment(tmp_path: Path, other: str) -> None:
    """The issue's case: `dependencies = [...]` on one line was the pins' 0.9.4 but an assumed environment."""
    one = _settings(tmp_path / "one", ONE_LINE)
    assert one == _settings(tmp_path / "other", other)
    assert one[0] == 'llamafactory-version = "0.9.4"'
    assert "pyproject.toml" in one[1] and "assumed" not in one[1]


@pytest.mark.parametrize("text", [ONE_LINE, SEVERAL_LINES, WITH_ARRAYS])
def test_every_reader_takes_the_same_dependencies(tmp_path: Path, text: str) -> None:
    (tmp_path / "pyproject.toml").write_text(text)
    assert [(p.name, p.spec) for p in project_dependencies(text) or []] == [
        ("llamafactory", "==0.9.4"),
        ("liger_kernel", ">=0.5"),
    ]
    assert read_packages(tmp_path / "pyproject.toml") == {"llamafactory": "==0.9.4", "liger_kernel": ">=0.5"}
    assert pins.pins_in(tmp_path)["llamafactory"].spec == "==0.9.4"
    linted, _ = requirement_pins("pyproject.toml", text)
    assert [(p.name, p.spec) for p in linted] == [("llamafactory", "==0.9.4"), ("liger_kernel", ">=0.5")]
    assert all(text[p.spec_start : p.spec_end] == p.spec for p in linted)


def test_a_pyproject_without_project_dependencies_states_none() -> None:
    assert project_dependencies('[tool.poetry.dependencies]\nllamafactory = "0.9.4"\n') is None
    assert project_dependencies('[project]\nname = "x"\n[tool.x]\ndependencies = ["torch"]\n') is None
    assert project_dependencies('[project]\ndependencies = [ # "torch==1.0",\n]\n') == []


def test_a_direct_reference_keeps_its_url_for_every_reader(tmp_path: Path) -> None:
    """`flash-attn @ URL`: the environment carries the URL as the requirement rules read it (ENV001), so a ROCm wheel
    is not refused by the planner while the rule accepts it."""
    wheel = "https://example.org/flash_attn-2.7.0+rocm6.2-cp311-linux_x86_64.whl"
    path = tmp_path / "requirements.txt"
    path.write_text(f"llamafactory==0.9.5\nflash-attn @ {wheel}\n")
    packages = read_packages(path) or {}
    assert packages["flash_attn"] == "@ " + wheel
    assert requirement_pins("requirements.txt", path.read_text())[0][1].spec == "@ " + wheel
    from cfgopt.environment import Environment

    env = Environment(packages, "requirements.txt")
    assert fa2_refusal(env, TARGETS["mi300x"]) is None


def test_a_requirement_is_read_once_with_its_extras_and_spans() -> None:
    pin = parse_requirement('LLaMA_Factory[Liger-Kernel, metrics] >= 0.9.3 ; python_version < "3.13"', 4)
    assert pin is not None
    assert (pin.name, pin.spec, pin.extras) == ("llama_factory", ">= 0.9.3", ("liger_kernel", "metrics"))
    assert (pin.name_start, pin.name_end) == (4, 17)
    assert parse_requirement("A tool") is None  # no operator: no requirement
    assert normalise("Liger.Kernel") == normalise("liger-kernel") == "liger_kernel"


def test_versions_are_parsed_and_compared_in_one_place() -> None:
    assert version_key("0.9.10") > version_key("0.9.5")
    dev = pip_version("0.9.6.dev0")
    assert dev is not None and dev.release == "0.9.6" and dev.dev and not dev.is_release
    assert pip_version("0.9.5") == ("0.9.5", False, False, False, False)
    assert spec_admits(">=0.9.2,!=0.9.3,<0.9.5", "0.9.4") and not spec_admits(">=0.9.2,!=0.9.3", "0.9.3")
    assert spec_admits("^0.16.4", "0.16.9") and not spec_admits("^0.16.4", "0.17.0")
    assert reaches(">=5.0.0,<6", (5, 0)) and not reaches("<=5.0", (5, 0)) and not reaches("@ url", (5, 0))


def test_poetry_dependencies_are_the_environment_as_they_are_the_pins(tmp_path: Path) -> None:
    """poetry's main dependencies state the release (the pins read them) and the environment; groups do not."""
    text = (
        '[tool.poetry]\nname = "job"\n[tool.poetry.dependencies]\npython = "^3.10"\n'
        'llamafactory = { version = "0.9.4", extras = ["liger-kernel"] }  # the release\ndeepspeed = "~0.16.4"\n'
        '[tool.poetry.group.dev.dependencies]\nbitsandbytes = "^0.45"\n'
    )
    (tmp_path / "pyproject.toml").write_text(text)
    assert read_packages(tmp_path / "pyproject.toml") == {
        "llamafactory": "0.9.4",
        "liger_kernel": "",
        "deepspeed": "~0.16.4",
    }
    assert pins.pins_in(tmp_path)["llamafactory"].spec == "0.9.4"
    assert pins.pins_in(tmp_path)["deepspeed"].spec == "~0.16.4"


# --------------------------------------------------------------------------- setup.cfg
SETUP_CFG = """[metadata]
name = job
[options]
packages = find:
install_requires =
    llamafactory[liger-kernel]==0.9.4  # the release
    # torch==1.0 (a comment line inside the value)
    ; deepspeed==0.1 (configparser's other comment prefix)

    deepspeed>=0.15,<0.17
python_requires = >=3.10
[options.extras_require]
bnb = bitsandbytes>=0.43; peft
dev =
    pytest
[options.entry_points]
console_scripts =
    job = job:main
"""


def _written(text: str, pins: list) -> list[tuple[str, str, str, str]]:
    """Each pin's name and spec, and the text its spans cover in the file."""
    return [(p.name, p.spec, text[p.name_start : p.name_end], text[p.spec_start : p.spec_end]) for p in pins]


def test_setup_cfg_lists_are_read_as_configparser_and_setuptools_read_them() -> None:
    """One requirement a line in a value of several lines, `;`-separated on one line, comment lines (`#`, `;`) and
    ` #` comments left out, only `install_requires` and the extras' lists."""
    assert _written(SETUP_CFG, setup_cfg_pins(SETUP_CFG)) == [
        ("llamafactory", "==0.9.4", "llamafactory", "==0.9.4"),
        ("deepspeed", ">=0.15,<0.17", "deepspeed", ">=0.15,<0.17"),
        ("bitsandbytes", ">=0.43", "bitsandbytes", ">=0.43"),
        ("peft", "", "peft", "peft"),
        ("pytest", "", "pytest", "pytest"),
    ]
    assert setup_cfg_pins(SETUP_CFG)[0].extras == ("liger_kernel",)
    assert [p.name for p in setup_cfg_pins(SETUP_CFG, extras=False)] == ["llamafactory", "deepspeed"]
    one_line = "[options]\ninstall_requires = torch>=2.4; transformers==4.46.0\n"
    assert [(p.name, p.spec) for p in setup_cfg_pins(one_line)] == [("torch", ">=2.4"), ("transformers", "==4.46.0")]
    assert setup_cfg_pins("[options]\ninstall_requires = file: requirements.in\n") == []  # files are not followed
    assert setup_cfg_pins("[tool]\ninstall_requires = torch==1.0\n") == []
    assert len(setup_cfg_pins("[options]\nInstall-Requires = torch==1.0\n")) == 1  # setuptools' deprecated spelling
    linted, indexes = requirement_pins("setup.cfg", SETUP_CFG)
    assert [p.name for p in linted] == ["llamafactory", "deepspeed", "bitsandbytes", "peft", "pytest"]
    assert indexes == []


# --------------------------------------------------------------------------- conda environment.yml
ENVIRONMENT_YML = """name: job
channels:
  - pytorch
  - conda-forge
dependencies:
  - python>=3.10
  - pytorch=2.5  # the conda build
  - conda-forge::deepspeed 0.15.4 py311h_0
  - "transformers>=4.45,<4.47"
  - pip
  - pip:
    - llamafactory[liger-kernel]==0.9.4
    - --extra-index-url https://download.pytorch.org/whl/cu121
    - -r requirements.txt
    - liger-kernel>=0.5  # fused kernels
variables:
  dependencies: none
"""


def test_an_environment_yml_gives_its_conda_specs_and_its_pip_lines_with_their_spans() -> None:
    pins, indexes = requirement_pins("environment.yml", ENVIRONMENT_YML)
    assert _written(ENVIRONMENT_YML, pins) == [
        ("torch", "==2.5.*", "pytorch", "=2.5"),
        ("deepspeed", "==0.15.4", "deepspeed", "0.15.4 py311h_0"),
        ("transformers", ">=4.45,<4.47", "transformers", ">=4.45,<4.47"),
        ("llamafactory", "==0.9.4", "llamafactory", "==0.9.4"),
        ("liger_kernel", ">=0.5", "liger-kernel", ">=0.5"),
    ]
    assert [ENVIRONMENT_YML[start:end] for _, start, end in indexes] == ["https://download.pytorch.org/whl/cu121"]
    conda, pip = conda_environment_items(ENVIRONMENT_YML)
    assert [item for item, _ in pip][2] == "-r requirements.txt"
    assert len(conda) == 5  # python and pip are conda specs too; `conda_pin` leaves them out


@pytest.mark.parametrize(
    "text",
    [
        "dependencies:\n- pytorch==2.5.1\n- pip:\n  - llamafactory==0.9.4\nname: job\n",  # items at the key's indent
        "name: job\r\ndependencies:  # conda\r\n  - pytorch==2.5.1\r\n  - pip:\r\n      - llamafactory==0.9.4\r\n",
        "dependencies:\n  - 'pytorch==2.5.1'\n\n  # a comment\n  - \"pip\":\n    - 'llamafactory==0.9.4'\n",
    ],
    ids=["unindented", "crlf", "quoted"],
)
def test_an_environment_yml_is_read_in_each_block_style(text: str) -> None:
    pins, _ = requirement_pins("environment.yaml", text)
    assert [(p.name, p.spec) for p in pins] == [("torch", "==2.5.1"), ("llamafactory", "==0.9.4")]
    assert [text[p.spec_start : p.spec_end] for p in pins] == ["==2.5.1", "==0.9.4"]


def test_an_environment_yml_without_a_block_list_states_nothing() -> None:
    assert requirement_pins("environment.yml", "dependencies: [pytorch]\n") == ([], [])
    assert requirement_pins("environment.yml", "name: job\nchannels:\n  - pytorch\n") == ([], [])


@pytest.mark.parametrize(
    ("spec", "pep440"),
    [
        # https://docs.conda.io/projects/conda/en/latest/user-guide/concepts/pkg-specs.html: `=` is fuzzy, `==` exact
        ("pytorch=2.5", "==2.5.*"),
        ("pytorch=2.5.*", "==2.5.*"),
        ("pytorch==2.5", "==2.5"),
        ("pytorch 2.5.1", "==2.5.1"),  # a version without an operator is exact
        ("pytorch=2.5.1=py3.11_cuda12.1_0", "==2.5.1"),  # with a build string the version is exact
        ("pytorch 1.8*", "==1.8.*"),
        ("numpy >=1.8 , <2 py38_0", ">=1.8,<2"),
        ("numpy>=1.*", ">=1"),  # conda drops `.*` after an order operator
        ("numpy!=1.5.*", "!=1.5.*"),
        ("numpy=*", ""),
        ("numpy 1.11.1|1.11.3", ""),  # an or: no PEP 440 form, read as unknown
        ("numpy[version='>=1.8']", ""),
        ("pytorch::pytorch-cuda=12.1", "==12.1.*"),
        ("conda-forge/linux-64::numpy 1.17.*", "==1.17.*"),
    ],
)
def test_a_conda_spec_is_read_in_pep_440_words(spec: str, pep440: str) -> None:
    pin = conda_pin(spec)
    assert pin is not None and pin.spec == pep440


def test_conda_fuzzy_and_exact_versions_admit_what_conda_installs() -> None:
    fuzzy, exact = conda_pin("pytorch=2.5"), conda_pin("pytorch==2.5")
    assert fuzzy is not None and exact is not None and fuzzy.name == exact.name == "torch"
    assert spec_admits(fuzzy.spec, "2.5.1") and spec_admits(fuzzy.spec, "2.5") and not spec_admits(fuzzy.spec, "2.50")
    assert spec_admits(exact.spec, "2.5.0") and not spec_admits(exact.spec, "2.5.1")
    assert [conda_pin(s) for s in ("python>=3.10", "pip", "https://x.org/a-1.0-0.conda", "a-1.0-0.tar.bz2")] == [
        None
    ] * 4
