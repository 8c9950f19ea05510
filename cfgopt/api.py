"""The Python API: lint or fix a config held in memory, with the same diagnostics the CLI prints.

    import cfgopt
    diagnostics = cfgopt.lint_text(yaml_text, kind="yaml", target="h100")
    fixed_text, remaining = cfgopt.fix_text(yaml_text, kind="yaml", unsafe_fixes=True)

A DeepSpeed JSON that the YAML names is looked up as if the config sat in `base_dir` (default: the system's
temporary folder, where nothing is found): the text is written to a temporary folder inside `base_dir`.
"""

from __future__ import annotations

from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:
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


def _write(text: str, kind: str, name: str | None, base_dir: Path | None, folder: Path) -> Path:
    if kind not in _SUFFIX:
        raise ValueError(f"kind must be one of {sorted(_SUFFIX)}, not {kind!r}")
    path = folder / (name or f"config{_SUFFIX[kind]}")
    path.write_text(text, encoding="utf-8", newline="")
    return path


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
    import tempfile

    from cfgopt.lint.engine import build_project
    from cfgopt.text.document import real_path

    settings = _settings(target, gpus, select, ignore)
    with tempfile.TemporaryDirectory(prefix="cfgopt-api-", dir=base_dir) as tmp:
        path = _write(text, kind, name, base_dir, Path(tmp))
        project = build_project([path], settings)
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
    import tempfile

    from cfgopt.lint.fixer import fix_paths
    from cfgopt.text.document import real_path

    settings = _settings(target, gpus, select, ignore, unsafe_fixes)
    with tempfile.TemporaryDirectory(prefix="cfgopt-api-", dir=base_dir) as tmp:
        path = _write(text, kind, name, base_dir, Path(tmp))
        result = fix_paths([path], settings)
        key = real_path(path)
        remaining = [d for d in result.remaining if real_path(d.path) == key]
        return result.fixed.get(key, text), remaining
