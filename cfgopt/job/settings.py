"""The settings one file is judged with: the target hardware and GPU count, the rule selection, the releases
judged, fix options, and the per-file parts of a project configuration (per-file ignores, excludes, fixable
rules).

Project configuration files make them depend on the file (the closest `cfgopt.toml` / `pyproject.toml
[tool.cfgopt]` wins): `cfgopt.lint.project_config.Resolver` builds each file's `Settings`, and the engine asks it
once per file (`Project.settings_of`) and hands the result to the rules in their `Context`. A `Settings`
built by hand (tests, `verify`, `tune`, the Python API) applies to every file (`per_file`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from cfgopt.knowledge.schema import (
    DEEPSPEED_VERSION,
    LLAMAFACTORY_VERSION,
    DeepSpeedSchema,
    LlamaFactorySchema,
    deepspeed,
    llamafactory,
)
from cfgopt.knowledge.targets import TARGETS, UNSTATED, Target
from cfgopt.text.diagnostics import Severity
from cfgopt.text.document import real_path
from cfgopt.text.real_paths import realpath

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Protocol

    from cfgopt.environment import Environment
    from cfgopt.knowledge.versions import VersionRange


class Settings:
    """One file's settings. A plain class rather than a dataclass: start-up time (docs/architecture.md)."""

    def __init__(
        self,
        *,
        # None: no target (none stated, none detected): hardware-specific rules stay quiet (targets.UNSTATED)
        target_name: str | None = None,
        gpus: int | None = None,  # None: not stated; rules that need it check every plausible count
        # Where the target and the GPU count came from (`gpus.resolve_target`): "--target", a project config file's
        # name, "detected"; "" for a hand-built Settings. A custom target (project config table) is `target_spec`.
        target_source: str = "",
        gpus_source: str = "",
        target_spec: Target | None = None,
        detected: str = "",  # GPUs found on this machine that no target matches ("2 x NVIDIA RTX A6000")
        select: list[str] | None = None,  # codes or prefixes; empty = the default selection
        extend_select: list[str] | None = None,  # added to the default selection (or to `select`)
        # The packages of the job's node: as the project states them (lint, fix: cfgopt.environment.stated), or as
        # `verify` and `tune` probe the node they run on (cfgopt.environment.probe); None: the stated default.
        environment: Environment | None = None,
        ignore: list[str] | None = None,
        fail_on: Severity = Severity.WARNING,
        unsafe_fixes: bool = False,
        # Which versions' schemas judge the files (cfgopt/knowledge/schemas/<package>-<version>.json).
        llamafactory_version: str = LLAMAFACTORY_VERSION,
        deepspeed_version: str = DEEPSPEED_VERSION,
        # The releases the user's project allows (option range or the repository's pins); None: unknown.
        llamafactory_range: VersionRange | None = None,
        deepspeed_range: VersionRange | None = None,
        # Project configuration (docs/configuration.md); globs are relative to `root`, the config file's folder.
        per_file_ignores: list[tuple[str, list[str]]] | None = None,
        exclude: list[str] | None = None,
        extra_templates: list[str] | None = None,  # chat templates a LLaMA-Factory fork registers
        fixable: list[str] | None = None,  # empty = every rule may fix
        unfixable: list[str] | None = None,
        force_exclude: bool = False,  # skip excluded paths even when named on the command line
        root: Path | None = None,
        config_file: Path | None = None,
    ) -> None:
        self.target_name = target_spec.name if target_spec is not None else target_name
        self.gpus = gpus
        self.target_source = target_source
        self.gpus_source = gpus_source
        self.target_spec = target_spec
        self.detected = detected
        self.select: list[str] = list(select or [])
        self.extend_select: list[str] = list(extend_select or [])
        self.given_environment = environment
        self.ignore: list[str] = list(ignore or [])
        self.fail_on = fail_on
        self.unsafe_fixes = unsafe_fixes
        self.llamafactory_version = llamafactory_version
        self.deepspeed_version = deepspeed_version
        self.llamafactory_range = llamafactory_range
        self.deepspeed_range = deepspeed_range
        self.per_file_ignores: list[tuple[str, list[str]]] = list(per_file_ignores or [])
        self.exclude: list[str] = list(exclude or [])
        self.extra_templates: list[str] = list(extra_templates or [])
        self.fixable: list[str] = list(fixable or [])
        self.unfixable: list[str] = list(unfixable or [])
        self.force_exclude = force_exclude
        self.root = root
        self.config_file = config_file

    def __repr__(self) -> str:
        return f"Settings({', '.join(f'{k}={v!r}' for k, v in vars(self).items())})"

    def __eq__(self, other: object) -> bool:
        return vars(self) == vars(other) if isinstance(other, Settings) else NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable

    @property
    def lf_schema(self) -> LlamaFactorySchema:
        return llamafactory(self.llamafactory_version)

    @property
    def ds_schema(self) -> DeepSpeedSchema:
        return deepspeed(self.deepspeed_version)

    @property
    def llamafactory_releases(self) -> tuple[str, ...]:
        """The LLaMA-Factory releases the job is judged for (`versions.judged_releases`): the range the project
        allows, else the selected release."""
        from cfgopt.knowledge.versions import judged_releases

        return judged_releases(self.llamafactory_version, self.llamafactory_range)

    @property
    def environment(self) -> Environment:
        """The packages of the node the job trains on: as given (stated, or probed where verify/tune run), else
        the stated default for the release and the target's platform (cfgopt.environment.stated.assumed), with the
        stated file passed over on the way, if any."""
        given = self.given_environment
        if given is not None and not given.assumed:
            return given
        from cfgopt.environment import stated

        default = stated.assumed(self.llamafactory_version, self.target.platform)
        return default._replace(passed_over=given.passed_over) if given is not None else default

    def copied(self) -> Settings:
        """A shallow copy (as `copy.copy`, whose module the lint path need not load): lists stay shared."""
        twin = object.__new__(Settings)
        twin.__dict__.update(self.__dict__)
        return twin

    @property
    def target(self) -> Target:
        """The target judged for, or `targets.UNSTATED` (no platform, no memory size) when there is none."""
        if self.target_spec is not None:
            return self.target_spec
        return UNSTATED if self.target_name is None else TARGETS[self.target_name]

    @property
    def target_stated(self) -> bool:
        return self.target_name is not None

    def is_selected(self, code: str) -> bool:
        """Longest matching prefix wins, as in ruff: `--select DS --ignore DS0` keeps DS1xx only;
        on a tie the ignore wins. Without `select`, the default selection (every rule but the opt-in ones,
        `Rule.default_on = False`) plus `extend_select`."""
        if self.select:
            return _prefix_choice(code, self.select + self.extend_select, self.ignore)
        # an empty `extend_select` adds nothing, an empty `ignore` drops nothing: a run asks for every rule's code
        # (about 300 calls), most often with neither
        if self.extend_select and _prefix_choice(code, self.extend_select, self.ignore, empty_is_all=False):
            return True
        from cfgopt.knowledge.rule_catalog import OPT_IN

        return code not in OPT_IN and (not self.ignore or _prefix_choice(code, [], self.ignore))

    def named(self, code: str) -> bool:
        """Was `code` itself (or ALL) selected, not only a prefix of it? (DS090 widens its comparison then.)"""
        return any(c in (code, "ALL") for c in self.select + self.extend_select) and self.is_selected(code)

    @property
    def restricts_fixes(self) -> bool:
        """Does the project config make some rules unfixable (`fixable` / `unfixable`)?"""
        return bool(self.fixable or self.unfixable)

    def is_fixable(self, code: str) -> bool:
        """`fixable` / `unfixable`, with the same longest-prefix rule as the selection."""
        return _prefix_choice(code, self.fixable, self.unfixable)

    def relative(self, path: Path) -> str:
        """`path` relative to the config's folder (POSIX separators), or absolute when outside it."""
        real = realpath(path)
        root = realpath(self.root) if self.root is not None else os.getcwd()
        try:
            rel = os.path.relpath(real, root)
        except ValueError:  # another drive on Windows
            return Path(real).as_posix()
        if rel == ".." or rel.startswith(".." + os.sep):
            return Path(real).as_posix()
        return Path(rel).as_posix()

    def is_excluded(self, path: Path) -> bool:
        return bool(self.exclude) and any(glob_match(p, self.relative(path)) for p in self.exclude)

    def ignored_in_file(self, path: Path, code: str) -> bool:
        """Does a `per-file-ignores` entry drop `code` in `path`?"""
        if not self.per_file_ignores:
            return False
        rel = self.relative(path)
        return any(
            glob_match(pattern, rel) and _prefix_choice(code, codes, [], empty_is_all=False)
            for pattern, codes in self.per_file_ignores
        )


if TYPE_CHECKING:

    class PerFileSettings(Protocol):
        """Gives each file its settings: `cfgopt.lint.project_config.Resolver` (the closest project config wins).
        A shape for the type checker alone: nothing checks it at run time, so it costs no import of `typing`."""

        def settings_for(self, path: Path) -> Settings: ...


def per_file(settings: Settings | PerFileSettings) -> Callable[[Path], Settings]:
    """Each file's settings: `settings` itself for every file, or what the resolver gives the file."""
    if isinstance(settings, Settings):
        return lambda _path: settings
    return settings.settings_for


def judged_with(file_settings: dict[Path, Settings], path: Path) -> Settings:
    """The settings `path` was judged with in a run (`file_settings`: each file's, by resolved path), the
    defaults for a file the run did not read."""
    return file_settings.get(real_path(path)) or Settings()


def _prefix_choice(code: str, chosen: list[str], dropped: list[str], empty_is_all: bool = True) -> bool:
    def best(prefixes: list[str]) -> int:
        return max((len(p) for p in prefixes if code.startswith(p) or p == "ALL"), default=-1)

    picked = best(chosen) if chosen or not empty_is_all else 0
    ignored = best(dropped)
    return picked >= 0 and (ignored < 0 or picked > ignored)


def glob_match(pattern: str, rel: str) -> bool:
    """Does a glob from a project config match a path (relative to the config's folder, POSIX)?

    As gitignore and ruff read them: a pattern without `/` matches any path component (`*.json`,
    `examples`); one with `/` matches from the config's folder (`examples/v1/*.yaml`, `**/ds_*.json`);
    a pattern matching a folder matches everything in it. `*` also crosses `/` (fnmatch)."""
    pat = pattern.strip()
    if pat.startswith("./"):
        pat = pat[2:]
    pat = pat.rstrip("/")
    if not pat:
        return False
    parts = rel.split("/")
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    if "/" not in pat:
        candidates += parts
    alternatives = [pat]
    if pat.startswith("**/"):
        alternatives.append(pat[3:])
    from fnmatch import fnmatchcase  # only with excludes or per-file ignores

    return any(fnmatchcase(c, p) for c in candidates for p in alternatives)
