"""The environment a job trains in: the packages of the node it runs on, never of the machine cfgopt runs on.

cfgopt runs on laptops, in CI and in pre-commit, where the packages a plan needs (liger-kernel, bitsandbytes,
torchao) are rarely installed; the job runs on a node that may have them. So what the job's environment has is
read from what the project states, in this order (`environment_for`), and every output says which:

1. `--environment PATH` or the project config's `environment` (a requirements or lock file, a snapshot that
   `cfgopt doctor --write-environment` wrote on the node, or a table `{ liger-kernel = "0.6.3" }`);
2. the job's requirement files (the closest folder, at or above the config's and up to the repository root,
   whose requirements*.txt, uv.lock, poetry.lock, setup.py, setup.cfg (`install_requires`), pyproject.toml
   (`[project] dependencies`, poetry's `[tool.poetry.dependencies]`) or conda environment.yml name LLaMA-Factory):
   the packages listed there, LLaMA-Factory's extras included, and no others;
3. a snapshot `cfgopt-environment.json` written by `cfgopt doctor --write-environment` on the node, in that
   folder walk (one that names no LLaMA-Factory is passed over, and the output says so: no training node wrote it);
4. else the stated default: what LLaMA-Factory's release installs for the target's platform, with the
   documented extras a plan uses (liger-kernel; bitsandbytes on NVIDIA), said as "assumed".

The interpreter cfgopt runs in never decides (only `cfgopt doctor`, run on the node, reads it); so the same
files and settings give the same findings and fixes on any machine. `verify` and `tune` run on the node and
state what they probe there (`cfgopt.environment.probe.environment_of`).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from cfgopt.environment import Environment, Origin
from cfgopt.knowledge.requirement_pins import CHECKED, admitted, flash_attn_not_for_rocm
from cfgopt.text.real_paths import realpath
from cfgopt.text.record import Record
from cfgopt.text.requirements.files import CONDA_ENVIRONMENT_FILES, is_requirement_file
from cfgopt.text.requirements.manifests import lock_pins, poetry_dependencies, project_dependencies, string_pins
from cfgopt.text.requirements.requirement import Pin, normalise
from cfgopt.text.requirements.versions import exact_version, platform_of_build, reaches
from cfgopt.text.user_files import parse_json, read_text_bounded

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from cfgopt.knowledge.targets import Target

SNAPSHOT_NAME = "cfgopt-environment.json"
Texts = dict[str, str]  # real path -> text that stands in for the file on disk (a fix not yet written)
ASSUMED = "assumed"  # `environment = "assumed"`: the stated default, even where requirement files exist

# What LLaMA-Factory's release installs (its core dependencies, pyproject.toml / setup.py of each tag) and the
# documented extras a plan may need, with their specifiers: setup.py `extra_require` in 0.9.0-0.9.3,
# requirements/<extra>.txt in 0.9.5 (0.9.4 declares neither: 0.9.3's are taken).
CORE = ("torch", "transformers", "datasets", "accelerate", "peft", "trl", "deepspeed")
LIGER_EXTRA = {"0.9.0": "", "0.9.1": "", "0.9.2": "", "0.9.3": ">=0.5.5", "0.9.4": ">=0.5.5", "0.9.5": ">=0.6.3"}
BITSANDBYTES_EXTRA = ">=0.39.0"
# torchao is no extra of any release; its 8-bit AdamW with bf16 stochastic rounding ran with 0.17.0 on the H200
TORCHAO_SPEC = ">=0.10.0"
# LLaMA-Factory's extras (`llamafactory[liger-kernel,bitsandbytes]`) -> the distributions they install
EXTRAS = {
    "liger_kernel": ("liger_kernel",),
    "bitsandbytes": ("bitsandbytes",),
    "deepspeed": ("deepspeed",),
    "torch": ("torch",),
    "badam": ("badam",),
    "galore": ("galore_torch",),
    "apollo": ("apollo_torch",),
    "adam_mini": ("adam_mini",),
    "vllm": ("vllm",),
    "sglang": ("sglang",),
}


def spec_for(distribution: str, llamafactory_version: str) -> str:
    """The specifier a pin added for `distribution` carries: the range LLaMA-Factory's release documents."""
    name = normalise(distribution)
    if name == "liger_kernel":
        return LIGER_EXTRA.get(llamafactory_version, LIGER_EXTRA["0.9.5"])
    if name == "bitsandbytes":
        return BITSANDBYTES_EXTRA
    if name == "torchao":
        return TORCHAO_SPEC
    return ""


@functools.lru_cache(maxsize=32)  # read by every rule that asks for a package: built once per release and platform
def assumed(llamafactory_version: str, platform: str) -> Environment:
    """The stated default: LLaMA-Factory's core install, with the extras a plan uses (bitsandbytes on NVIDIA only:
    ROCm needs its own build, ENV003)."""
    packages = {normalise(name): "" for name in CORE}
    packages["llamafactory"] = "==" + llamafactory_version
    packages["liger_kernel"] = spec_for("liger-kernel", llamafactory_version)
    extras = ["liger-kernel"]
    if platform != "rocm":
        packages["bitsandbytes"] = BITSANDBYTES_EXTRA
        extras.append("bitsandbytes")
    what = f"LLaMA-Factory {llamafactory_version} with its {' and '.join(extras)} extras"
    return Environment(packages, f"{ASSUMED}: {what}", Origin.ASSUMED)


# --------------------------------------------------------------------------- reading what the project states


def _add_requirements(packages: dict[str, str], found: list[Pin]) -> dict[str, str]:
    """The requirements into `packages` (the first of each name wins), LLaMA-Factory's extras expanded."""
    for pin in found:
        packages.setdefault(pin.name, pin.spec)
        if pin.name in ("llamafactory", "llama_factory"):
            for extra in pin.extras:
                for dist in EXTRAS.get(extra, ()):
                    packages.setdefault(dist, "")
    return packages


def _requirements_txt(text: str, path: Path | None = None, texts: Texts | None = None) -> dict[str, str]:
    """A requirements file's packages, those of the files its `-r` lines include too."""
    from cfgopt.text.requirements.pip_files import line_pins, logical_lines, requirement_lines  # with such a file

    lines = requirement_lines(path, text, lambda p: _text_of(p, texts)) if path else logical_lines(text)
    return _add_requirements({}, line_pins(lines))


def _setup_py(text: str) -> dict[str, str]:
    return _add_requirements({}, string_pins(text, "python"))


def _setup_cfg(text: str) -> dict[str, str]:
    """`[options] install_requires` only: extras are not what the job installs (as a pyproject.toml's)."""
    from cfgopt.text.requirements.setup_cfg import setup_cfg_pins  # each format's reader loads with its file

    return _add_requirements({}, setup_cfg_pins(text, extras=False))


def _pyproject(text: str) -> dict[str, str]:
    """`[project] dependencies` and poetry's `[tool.poetry.dependencies]` only: optional dependencies and groups
    (test, dev, ...) are not what the job installs."""
    return _add_requirements({}, (project_dependencies(text) or []) + (poetry_dependencies(text) or []))


def _lock(text: str) -> dict[str, str]:
    return {pin.name: pin.spec for pin in lock_pins(text)}


def _snapshot(text: str) -> dict[str, str] | None:
    """A `cfgopt doctor --write-environment` snapshot: {"packages": {name: version}}; None when it is not one."""
    try:
        data = parse_json(text)
    except ValueError:
        return None
    packages = data.get("packages") if isinstance(data, dict) else None
    if not isinstance(packages, dict):
        return None
    return {normalise(str(k)): "==" + str(v) if v else "" for k, v in packages.items()}


_READERS = {
    "uv.lock": _lock,
    "poetry.lock": _lock,
    "pyproject.toml": _pyproject,
    "setup.py": _setup_py,
    "setup.cfg": _setup_cfg,
}


def _pip_reads(path: Path) -> bool:
    """Is the file read as a requirements file pip reads (`read_packages` reads any other name so: `-r FILE`)?"""
    return path.suffix != ".json" and path.name not in CONDA_ENVIRONMENT_FILES and path.name not in _READERS


def _file_text(path: Path) -> str:
    """A file's text: a requirements file as pip decodes it (RequirementsDecodeError where pip cannot), any other
    as UTF-8 (their readers' own encoding), undecodable bytes replaced."""
    if not _pip_reads(path):
        return read_text_bounded(path)
    from cfgopt.text.requirements.pip_encoding import read_requirements  # pip's decoding loads with a file pip reads

    return read_requirements(path)


def read_packages(path: Path, texts: Texts | None = None, naming_llamafactory: bool = False) -> dict[str, str] | None:
    """The packages one file states (a requirement or lock file, or a doctor snapshot); None when it cannot be
    read, pip cannot decode it, or it is no such file. `texts` (real path -> text) stand in for files on disk:
    `cfgopt fix`'s edits. `naming_llamafactory`: {} for a manifest or lock file whose text names no LLaMA-Factory,
    not parsed: every name such a file states is its own text's, ASCII, starting and ending with a letter or digit,
    so it is in the text `normalise`d too (a requirements file may include another that names it: always read)."""
    given = (texts or {}).get(realpath(path))
    try:
        text = given if given is not None else _file_text(path)
    except (OSError, ValueError):
        return None
    if naming_llamafactory and path.name in _READERS and not _names_llamafactory(normalise(text)):
        return {}
    if path.suffix == ".json":
        return _snapshot(text)
    if path.name in CONDA_ENVIRONMENT_FILES:  # its `- pip:` lines may include files (`-r`)
        from cfgopt.text.requirements.conda import conda_environment_requirements

        return _add_requirements({}, conda_environment_requirements(path, text, lambda p: _text_of(p, texts)))
    reader = _READERS.get(path.name)
    return reader(text) if reader is not None else _requirements_txt(text, path, texts)


def _text_of(path: Path, texts: Texts | None) -> str:
    """A file a `-r` line includes, as pip decodes it ("" when it cannot be read or decoded)."""
    given = (texts or {}).get(realpath(path))
    if given is not None:
        return given
    from cfgopt.text.requirements.pip_encoding import read_requirements

    try:
        return read_requirements(path)
    except (OSError, ValueError):
        return ""


def _names_llamafactory(packages: dict[str, str] | str) -> bool:
    return "llamafactory" in packages or "llama_factory" in packages


def _folder_environment(folder: Path, texts: Texts | None = None) -> Environment | None:
    """The environment one folder's requirement files state (only files that name LLaMA-Factory: the job's), or
    its doctor snapshot."""
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return None
    stated: dict[str, str] = {}
    files: list[str] = []
    for name in names:
        if is_requirement_file(name):
            found = read_packages(folder / name, texts, naming_llamafactory=True)
            if found and _names_llamafactory(found):
                files.append(name)
                for package, spec in found.items():
                    stated.setdefault(package, spec)
    if files:
        txt = next((f for f in files if f.endswith(".txt")), None)
        return Environment(stated, ", ".join(_shown(folder / f) for f in files), requirement_file=_txt(folder, txt))
    if SNAPSHOT_NAME in names:
        found = read_packages(folder / SNAPSHOT_NAME)
        if found is not None:
            return Environment(found, f"{_shown(folder / SNAPSHOT_NAME)} (cfgopt doctor)", Origin.SNAPSHOT)
    return None


def _txt(folder: Path, name: str | None) -> Path | None:
    return folder / name if name is not None else None


def _shown(path: Path) -> str:
    """A file as outputs name it: relative to the working directory when inside it."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path.as_posix()
    return path.as_posix() if rel.startswith("..") else Path(rel).as_posix()


# A snapshot is the node's installed stack; one without LLaMA-Factory was written where the job cannot train (the
# doctor of a laptop or CI machine, before `doctor` refused to write it), so it is passed over, and the output says so.
SNAPSHOT_WITHOUT_LLAMAFACTORY = (
    "{source} not used: it names no LLaMA-Factory, so it was written on a machine the job cannot train on "
    "(write it on the training node: `cfgopt doctor --write-environment`)"
)


def _not_a_training_node(env: Environment) -> bool:
    """Is `env` a doctor snapshot without LLaMA-Factory (not the packages of any node the job trains on)?"""
    return env.origin is Origin.SNAPSHOT and not _names_llamafactory(env.packages)


def _noting(found: Environment | None, note: str) -> Environment:
    """`found` with a file passed over below it; None (the stated default) as an empty assumed environment that
    carries the note (`Settings.environment` puts the default in its place)."""
    if found is None:
        return Environment({}, ASSUMED, Origin.ASSUMED, passed_over=note)
    return found._replace(passed_over=note)


def found_environment(
    folder: Path, cache: dict[str, Environment | None] | None = None, texts: Texts | None = None
) -> Environment | None:
    """The closest stated environment at or above `folder`, up to the repository root (the folder with `.git`);
    a snapshot passed over on the way (`_not_a_training_node`) is named on what is found, the default included."""
    known = {} if cache is None else cache
    current = realpath(folder)
    visited: list[tuple[str, str]] = []  # (folder, why its snapshot was passed over, or "")
    found: Environment | None = None
    while True:
        if current in known:
            found = known[current]
            break
        found = _folder_environment(Path(current), texts)
        passed = found is not None and _not_a_training_node(found)
        note = SNAPSHOT_WITHOUT_LLAMAFACTORY.format(source=found.source) if found is not None and passed else ""
        found = None if note else found
        visited.append((current, note))
        parent = os.path.dirname(current)
        if found is not None or parent == current or os.path.exists(os.path.join(current, ".git")):
            break
        current = parent
    for seen, note in reversed(visited):  # from the top down: the closest snapshot passed over is the one named
        found = _noting(found, note) if note else found
        known.setdefault(seen, found)
    return found


class EnvironmentOptionError(ValueError):
    """An `environment` option that cannot be used (a file that is not there or states nothing)."""


def stated_environment(value: Any, where: str, base: Path) -> Environment | None:
    """`--environment` / the project config's `environment`: a file (relative to `base`), a table of packages, or
    "assumed" (None: the default is taken)."""
    if isinstance(value, dict):
        packages = {normalise(str(k)): _as_spec(v) for k, v in value.items()}
        return Environment(packages, where, explicit=True)
    if not isinstance(value, str) or not value.strip():
        raise EnvironmentOptionError(f"{where}: expected a requirements/lock file, a doctor snapshot or a table")
    if value.strip() == ASSUMED:
        return None
    path = Path(os.path.expanduser(value.strip()))
    path = path if path.is_absolute() else base / path
    packages = read_packages(path)
    if packages is None:
        raise EnvironmentOptionError(
            f"{where}: {value} cannot be read as a requirements/lock file or a doctor snapshot{_undecodable(path)}"
        )
    txt = path if path.suffix == ".txt" else None
    origin = Origin.SNAPSHOT if path.suffix == ".json" else Origin.STATED
    env = Environment(packages, f"{_shown(path)} ({where})", origin, requirement_file=txt, explicit=True)
    if _not_a_training_node(env):
        raise EnvironmentOptionError(
            f"{where}: {value} is a doctor snapshot that names no LLaMA-Factory: not the training node's packages "
            "(write it there: `cfgopt doctor --write-environment`)"
        )
    return env


def _undecodable(path: Path) -> str:
    """Why pip cannot decode the requirements file `path`, as " (words)"; "" when that is not why it was not read."""
    from cfgopt.text.requirements.pip_encoding import RequirementsDecodeError, read_requirements

    try:
        if _pip_reads(path):
            read_requirements(path)
    except RequirementsDecodeError as exc:
        return f" ({exc})"
    except OSError:
        pass
    return ""


def _as_spec(value: Any) -> str:
    """A table's version (`"0.6.3"`, `">=0.6"`, `""`, `true`) as a specifier."""
    text = "" if value is True else str(value).strip()
    return "==" + text if text[:1] in "0123456789" and text else text


def transformers_at_least(env: Environment, floor: tuple[int, ...]) -> bool:
    """Does the environment's transformers reach `floor`? Known from an exact pin or a lower bound at or above it;
    a probed node is taken at its word (verify/tune run what is installed there)."""
    return env.origin is Origin.PROBED or reaches(env.packages.get("transformers", ""), floor)


class Fa2Outcome(Record):
    """What `flash_attn: fa2` does in a job (`fa2_outcome`): FlashAttention-2 runs; or it does not and LLaMA-Factory
    falls back (no flash-attn, or no GPU torch could hand it: `runs` False, `stops` None); or it stops the job."""

    runs: bool
    stops: str | None = None  # why `fa2` stops the job, in words ending with the rule that says so (LF049)


def fa2_outcome(env: Environment, target: Target) -> Fa2Outcome:
    """What `flash_attn: fa2` does for a job on `target` with `env`: the one answer the speed plan ranks by and
    LF049 judges the YAML by. LLaMA-Factory 0.9.5 asks transformers' `is_flash_attn_2_available()`, which reads
    the package's metadata and `torch.cuda.is_available()` (true on ROCm torch) and imports nothing: without
    flash-attn (or a GPU) it warns "FlashAttention-2 is not installed." and keeps SDPA, eager for Gemma 2
    (model/model_utils/attention.py L46-53, L77-82); with it, `flash_attention_2` is requested whatever the build.
    Before Ampere flash-attn's first forward pass stops (`mha_fwd`); a CUDA build on ROCm cannot load its extension
    (`flash_attn_2_cuda` links libc10_cuda / libcudart, which ROCm torch does not ship), and transformers 4.56 and
    later import it when the model loads (`lazy_import_flash_attention`; 4.55 at the first forward pass). No
    target, a build that cannot be told (the default index builds for the torch present) or a node's installed
    build: nothing known stops it (`fa2_refusal` still keeps the plan from turning it on)."""
    if not env.has("flash_attn") or target.platform == "cpu":
        return Fa2Outcome(False)
    if target.is_cuda and not target.runs_fa2:
        return Fa2Outcome(
            False,
            f"{target.name} is older than Ampere: flash-attn's first forward pass stops with `FlashAttention only "
            "supports Ampere GPUs or newer.` (LF049)",
        )
    spec = env.packages.get(normalise("flash-attn"), "")
    if target.is_rocm and not env.installed and platform_of_build(spec) == "cuda":
        return Fa2Outcome(
            False,
            f"the flash-attn in {env.where} is a CUDA build: on {target.name} its extension does not load with ROCm "
            "torch, so the model load stops (LF049)",
        )
    return Fa2Outcome(True)


def fa2_refusal(env: Environment, target: Target) -> str | None:
    """Why the plan turns FlashAttention-2 on nowhere for a job on `target` with `env`, in words (None: nothing
    known against it; whether flash-attn is there at all is `Environment.has`'s question): where it stops the job
    (`fa2_outcome`), and where it may not run (no target; on ROCm a flash-attn whose build cannot be told, ENV001).
    The rules name the same reasons (LF049 on the YAML, ENV001 on the requirement)."""
    if not target.stated:
        return "no target stated: FlashAttention-2 runs only on NVIDIA Ampere or newer, or with AMD's ROCm build"
    if not target.runs_fa2:
        older = target.is_cuda and not target.bf16
        return (
            f"{target.name} is older than Ampere: flash-attn stops at the first step with `FlashAttention only "
            "supports Ampere GPUs or newer.` (LF049)"
            if older
            else f"{target.name} has no GPU that FlashAttention-2 runs on"
        )
    stops = fa2_outcome(env, target).stops if env.has("flash_attn") else None
    if stops:
        return stops
    spec = env.packages.get(normalise("flash-attn"), "")
    if target.is_rocm and env.has("flash_attn") and not env.installed and flash_attn_not_for_rocm(spec):
        return (
            f"the flash-attn in {env.where} may not be AMD's build: from the default index it builds for the torch "
            f"present at build time, and on {target.name} only AMD's build runs (ENV001)"
        )
    return None


def stops_at_start(env: Environment, llamafactory_version: str, release: str) -> str | None:
    """Why a job in `env` stops at start-up, in one line (None: nothing known): an exact pin of a package that
    LLaMA-Factory's `check_dependencies` checks, outside the selected release's range (ENV002's error case; the
    ranges: cfgopt.knowledge.requirement_pins). `release`: the release as outputs name it."""
    for package, checked in CHECKED.get(llamafactory_version, {}).items():
        version = exact_version(env.packages.get(package, ""))
        if version is not None and not admitted(package, checked, version):
            return (
                f"{package} {version} in {env.where} is outside {release}'s check ({package}{checked}): the job stops "
                "at start-up unless DISABLE_VERSION_CHECK=1 (ENV002)"
            )
    return None


def torch_finds_no_gpu(env: Environment, target: Target) -> str | None:
    """Why the job's torch sees no GPU of `target`, in one line (None: nothing known): a torch pinned as a build
    for the other platform (`+cu121` on ROCm, `+rocm6.2` on NVIDIA; ENV001's torch case)."""
    if not (target.is_rocm or target.is_cuda):
        return None  # no platform to judge the build against (no target stated)
    build = platform_of_build(env.packages.get("torch", ""))
    if not build or build == target.platform:
        return None
    names = {"cuda": "CUDA", "rocm": "ROCm"}
    return f"torch in {env.where} is a {names[build]} build: on {target.name} it finds no GPU (ENV001)"
