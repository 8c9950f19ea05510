"""The Python API: lint or fix a config held in memory, with the same diagnostics the CLI prints.

    import cfgopt
    diagnostics = cfgopt.lint_text(yaml_text, kind="yaml", target="h100")
    fixed_text, remaining = cfgopt.fix_text(yaml_text, kind="yaml", unsafe_fixes=True)

The text is judged as the file `base_dir / name` (`name` default: config.yaml, config.json or config.sh), as
`cfgopt lint - --stdin-filename` judges stdin: a DeepSpeed JSON the YAML names, and the project's config and pins,
are found where that file would find them; nothing is written there (the text stands in for the file, and for a
file of that name on disk). Without `base_dir` the file sits alone in an empty temporary folder, where nothing else
is found.
"""

from __future__ import annotations

from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from cfgopt.job.settings import Settings
    from cfgopt.text.diagnostics import Diagnostic

# The package's face (`cfgopt/__init__.py`) hands this module's two functions on, so `import cfgopt` loads it on
# every command line: what the functions use is imported when one is called.

_SUFFIX = {
    "yaml": ".yaml",
    "yml": ".yaml",
    "json": ".json",
    "deepspeed": ".json",
    "llamafactory": ".yaml",
    "script": ".sh",
    "sh": ".sh",
}


def _settings(
    target: str | None, gpus: int | None, select: list[str] | None, ignore: list[str] | None, unsafe_fixes: bool = False
) -> Settings:
    from cfgopt.job.settings import Settings

    settings = Settings(gpus=gpus, select=list(select or []), ignore=list(ignore or []), unsafe_fixes=unsafe_fixes)
    if target:
        settings.target_name = target
        settings.target  # noqa: B018 - raises KeyError for an unknown target, before any work
    return settings


def _standing_in(text: str, kind: str, name: str | None, folder: Path) -> tuple[Path, dict[Path, str]]:
    """The path the text is judged as, and the overlay that makes the text that file's (no file is written)."""
    from cfgopt.text.document import real_path

    if kind not in _SUFFIX:
        raise ValueError(f"kind must be one of {sorted(_SUFFIX)}, not {kind!r}")
    path = folder / (name or f"config{_SUFFIX[kind]}")
    return path, {real_path(path): text}


def _folder(base_dir: Path | None) -> AbstractContextManager[str]:
    """`base_dir` as given, else an empty temporary folder for the call's length."""
    import tempfile
    from contextlib import nullcontext

    return nullcontext(str(base_dir)) if base_dir is not None else tempfile.TemporaryDirectory(prefix="cfgopt-api-")


def lint_text(
    text: str,
    kind: str = "yaml",
    *,
    target: str | None = None,
    gpus: int | None = None,
    select: list[str] | None = None,
    ignore: list[str] | None = None,
    name: str | None = None,
    base_dir: Path | None = None,
) -> list[Diagnostic]:
    """Diagnostics for one config given as text (`kind`: yaml, json or script)."""
    from cfgopt.lint.engine import build_project
    from cfgopt.text.document import real_path

    settings = _settings(target, gpus, select, ignore)
    with _folder(base_dir) as folder:
        path, overlay = _standing_in(text, kind, name, Path(folder))
        project = build_project([path], settings, overlay)
        return [d for d in project.diagnostics() if real_path(d.path) == real_path(path)]


def fix_text(
    text: str,
    kind: str = "yaml",
    *,
    target: str | None = None,
    gpus: int | None = None,
    select: list[str] | None = None,
    ignore: list[str] | None = None,
    unsafe_fixes: bool = False,
    name: str | None = None,
    base_dir: Path | None = None,
) -> tuple[str, list[Diagnostic]]:
    """The fixed text (span edits only; unchanged when nothing applies) and the diagnostics left in it."""
    from cfgopt.lint.fixer import fix_paths
    from cfgopt.text.document import real_path

    settings = _settings(target, gpus, select, ignore, unsafe_fixes)
    with _folder(base_dir) as folder:
        path, overlay = _standing_in(text, kind, name, Path(folder))
        result = fix_paths([path], settings, overlay=overlay)
        key = real_path(path)
        remaining = [d for d in result.remaining if real_path(d.path) == key]
        return result.fixed.get(key, text), remaining
