"""One `Environment` type for the packages of the job's node, whoever learned them: the project's requirement files
and `--environment` (lint, fix), the node's dist-info folders (`cfgopt doctor`), the node's imports (the probe of
`verify` and `tune`), or nothing (the assumed default). Each reader builds it and says where it learned it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_nodes import laptop_root, site

from cfgopt.doctor.command import snapshot
from cfgopt.environment import Environment, Origin, package_key
from cfgopt.environment.node import read_stack
from cfgopt.environment.probe import Platform, environment_of, probed_environment
from cfgopt.environment.stated import assumed, found_environment, stated_environment, transformers_at_least
from cfgopt.job.settings import Settings


def test_every_reader_gives_the_one_type_and_says_where_it_learned_it(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()  # the repository's root: the folder walk stops here
    (tmp_path / "requirements.txt").write_text("llamafactory==0.9.5\nliger-kernel>=0.6\n")
    stated = found_environment(tmp_path, {})
    node = read_stack(str(laptop_root(tmp_path)), [str(site(tmp_path, "cpu"))], {}).environment
    probed = environment_of(Platform(cuda=True, liger=True, bitsandbytes=True))
    default = assumed("0.9.5", "cuda")
    found = {env.origin: env for env in (stated, node, probed, default) if isinstance(env, Environment)}
    assert set(found) == {Origin.STATED, Origin.INSTALLED, Origin.PROBED, Origin.ASSUMED}
    assert [e.installed for e in found.values()] == [False, True, True, False]
    assert [e.assumed for e in found.values()] == [False, False, False, True]
    assert probed.has("liger_kernel") and probed.has("bitsandbytes") and not probed.has("flash_attn")


def test_a_snapshot_is_what_the_node_installed(tmp_path: Path) -> None:
    """A doctor snapshot, found beside the job or named by --environment: the node's own builds (ENV001 does not
    judge them), stated explicitly only when named."""
    path = tmp_path / "cfgopt-environment.json"
    path.write_text(json.dumps({"packages": {"llamafactory": "0.9.5", "torch": "2.5.1+rocm6.2"}}))
    (tmp_path / ".git").mkdir()
    found = found_environment(tmp_path, {})
    named = stated_environment(str(path), "--environment", tmp_path)
    assert found is not None and named is not None
    assert (found.origin, found.explicit, named.origin, named.explicit) == (
        Origin.SNAPSHOT,
        False,
        Origin.SNAPSHOT,
        True,
    )
    assert found.installed and named.version("torch") == "2.5.1+rocm6.2"


@pytest.mark.parametrize(
    ("spec", "version"),
    [
        ("==2.5.1+rocm6.2", "2.5.1+rocm6.2"),  # the local label kept: the build is part of what is installed
        ("===0.9.5", "0.9.5"),
        ("2.7.4", "2.7.4"),  # poetry's bare version is an exact pin
        (">=0.6.3", None),
        ("==0.6.*", None),
        (">=2.3,<2.8", None),
        ("", None),  # named, no version
        ("==not a version", None),
    ],
)
def test_the_exact_version_of_a_pin(spec: str, version: str | None) -> None:
    env = Environment({"flash_attn": spec}, "requirements.txt")
    assert env.version("flash-attn") == env.version("flash_attn") == version


def test_an_installed_version_pip_would_not_parse_is_still_the_nodes() -> None:
    """An old egg's folder name (`foo-1.0_dev.egg-info`): doctor must not call it missing (a false DOC012)."""
    installed = Environment({"foo": "==1.0_dev"}, "this node", Origin.INSTALLED)
    assert installed.version("foo") == "1.0_dev"
    assert Environment({"foo": "==1.0_dev"}, "requirements.txt").version("foo") is None
    assert installed.version("bar") is None


def test_import_and_distribution_names_are_one_key() -> None:
    env = Environment({package_key("Liger-Kernel"): "==0.6.3"}, "requirements.txt")
    assert env.has("liger_kernel") and env.has("liger-kernel") and env.has("Liger.Kernel")
    assert env.version("liger_kernel") == "0.6.3"


def test_the_doctors_snapshot_reads_back_as_the_same_packages(tmp_path: Path) -> None:
    """What `cfgopt doctor --write-environment` writes from the node's Environment, lint reads back into one with
    the same versions (origin snapshot)."""
    folder = site(tmp_path, "rocm", liger_kernel="0.6.4", bitsandbytes="0.49.0")
    stack = read_stack(str(laptop_root(tmp_path)), [str(folder)], {})
    node = stack.environment
    written = tmp_path / "cfgopt-environment.json"
    written.write_text(json.dumps(snapshot(stack)))
    read = stated_environment(str(written), "--environment", tmp_path)
    assert read is not None and read.origin is Origin.SNAPSHOT
    assert {name: read.version(name) for name in read.packages} == {name: node.version(name) for name in read.packages}
    assert read.version("torch") == "2.11.0+rocm7.1"


def test_settings_take_one_environment_as_given_else_assumed() -> None:
    """verify and tune give the probed node, lint the stated one; none given: the stated default."""
    probed = probed_environment(["torchao"])
    assert Settings(environment=probed).environment is probed
    default = Settings(target_name="mi300x").environment
    assert default.origin is Origin.ASSUMED and not default.has("bitsandbytes")  # ROCm needs its own build


def test_a_probed_node_is_taken_at_its_word() -> None:
    """The probe asks no versions: verify and tune run what is installed, so a version floor is not held against
    it; a requirement file's range is judged."""
    assert transformers_at_least(probed_environment([]), (4, 57))
    assert not transformers_at_least(Environment({"transformers": ">=4.40"}, "requirements.txt"), (4, 57))
    assert transformers_at_least(Environment({"transformers": "==4.57.1"}, "requirements.txt"), (4, 57))


MANIFESTS = {
    "pyproject.toml": [
        '[project]\nname = "x"\ndependencies = ["llamafactory[metrics]==0.9.5", "torch"]\n',
        '[project]\ndependencies = ["LLaMA-Factory>=0.9.4"]\n',
        '[project]\ndependencies = ["torch>=2.4", "deepspeed==0.16.4"]\n',
        '[tool.poetry.dependencies]\npython = "^3.11"\n"Llama.Factory" = "0.9.5"\n',
        '[tool.poetry.dependencies]\ntorch = "*"\n# llamafactory = "0.9.5"\n',
    ],
    "setup.py": ['setup(install_requires=["llama_factory==0.9.5"])\n', 'setup(install_requires=["torch"])\n'],
    "setup.cfg": [
        "[options]\ninstall_requires =\n    llamafactory\n    torch\n",
        "[options]\ninstall_requires = peft\n",
    ],
    "uv.lock": [
        '[[package]]\nname = "llamafactory"\nversion = "0.9.5"\n',
        '[[package]]\nname = "torch"\nversion = "2.5"\n',
    ],
}


@pytest.mark.parametrize(("name", "text"), [(n, t) for n, texts in MANIFESTS.items() for t in texts])
def test_a_folder_environment_skips_only_manifests_that_name_no_llamafactory(
    tmp_path: Path, name: str, text: str
) -> None:
    """A folder's environment keeps only files naming LLaMA-Factory: a manifest whose text does not is not parsed,
    and what it would have stated names none."""
    from cfgopt.environment.stated import read_packages

    (tmp_path / name).write_text(text)
    full = read_packages(tmp_path / name)
    kept = read_packages(tmp_path / name, naming_llamafactory=True)
    if full is not None and {"llamafactory", "llama_factory"} & set(full):
        assert kept == full
    else:  # left unparsed, or parsed for nothing the folder's environment keeps
        assert kept in ({}, full)
