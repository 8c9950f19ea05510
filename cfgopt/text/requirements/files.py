"""Which files state requirements (`is_requirement_file`), and every pin of one with its span and the package
indexes it names, as the requirement rules lint it (`requirement_pins`)."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from cfgopt.text.requirements.requirement import Pin

# The requirement rules (cfgopt/rules/env*) lint the same files `cfgopt.environment.pins` reads, for every package
# they name and with the position of each pin; `cfgopt.loaders.requirement_files` builds a Source from these.
CONDA_ENVIRONMENT_FILES = ("environment.yml", "environment.yaml")
REQUIREMENT_FILES = ("uv.lock", "poetry.lock", "pyproject.toml", "setup.py", "setup.cfg", *CONDA_ENVIRONMENT_FILES)


def is_requirements_txt(name: str) -> bool:
    """A requirements*.txt: a file pip reads (`-r`), decoded as pip decodes it (`pip_encoding`)."""
    return name.startswith("requirements") and name.endswith(".txt")


def is_requirement_file(name: str) -> bool:
    """A file that states requirements (the pins, the environment and the requirement rules read it), by name."""
    return name in REQUIREMENT_FILES or is_requirements_txt(name)


def requirement_pins(file_name: str, text: str) -> tuple[list[Pin], list[tuple[str, int, int]]]:
    """Every pin of a requirement file (any package) with its span, and the package index URLs it names (each
    format's reader imported when a file of it is read: a lint run reads few of them)."""
    if file_name in ("uv.lock", "poetry.lock"):
        from cfgopt.text.requirements.manifests import lock_pins

        return lock_pins(text), []
    if file_name in ("pyproject.toml", "setup.py"):
        from cfgopt.text.requirements.manifests import manifest_pins

        return manifest_pins(text, "python" if file_name == "setup.py" else "toml")
    if file_name == "setup.cfg":
        from cfgopt.text.requirements.setup_cfg import setup_cfg_pins

        return setup_cfg_pins(text), []
    if file_name in CONDA_ENVIRONMENT_FILES:
        from cfgopt.text.requirements.conda import conda_environment_pins

        return conda_environment_pins(text)
    from cfgopt.text.requirements.pip_files import requirements_txt_pins

    return requirements_txt_pins(text)
