"""Project configuration: `[tool.cfgopt]` in `pyproject.toml`, or `cfgopt.toml` / `.cfgopt.toml` (top-level
keys), the closest one to each linted file winning, as in ruff (docs/configuration.md).

Three layers, as ruff's Options / Configuration / Settings: a file's options are read and checked here
(`load_options`: unknown options are a usage error with a did-you-mean), `--config KEY=VALUE` overrides go
on top, the command-line flags on top of those, and `Resolver.settings_for` turns the result into the
`cfgopt.job.settings.Settings` one file is judged with. Nothing here imports a TOML parser unless a config file
(or a `--config` override) is actually there to read.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from cfgopt.environment.gpus import Resolved, resolve_target
from cfgopt.job.settings import Settings
from cfgopt.knowledge.targets import MAX_GPUS, TARGETS, TargetError, check_name, custom_target
from cfgopt.text.diagnostics import Severity
from cfgopt.text.document import display_path, shown
from cfgopt.text.patterns import lazy
from cfgopt.text.real_paths import real_path, realpath
from cfgopt.text.record import Record
from cfgopt.text.user_files import UnsafeFileError, read_bounded
from cfgopt.text.user_text import positive_int

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from cfgopt.environment import Environment
    from cfgopt.knowledge.versions import VersionRange

CONFIG_NAMES = (".cfgopt.toml", "cfgopt.toml", "pyproject.toml")

# option -> what it takes (for messages and `--show-settings`)
OPTIONS: dict[str, str] = {
    "target": f"one of {', '.join(TARGETS)}, none (no target, no detection), or a custom table "
    '{ name = "my-gpu", memory-gib = 48, bf16 = true, vendor = "nvidia" } (docs/targets.md)',
    "gpus": f"an integer from 1 to {MAX_GPUS}",
    "select": "a list of rule codes, prefixes or names",
    "ignore": "a list of rule codes, prefixes or names",
    "extend-select": "a list of rule codes, prefixes or names",
    "per-file-ignores": 'a table of glob = list of codes, e.g. {"examples/**" = ["LF023"]}',
    "fixable": "a list of rule codes, prefixes or names",
    "unfixable": "a list of rule codes, prefixes or names",
    "unsafe-fixes": "true or false",
    "llamafactory-version": 'a shipped LLaMA-Factory snapshot, prefix or range, e.g. 0.9.4 or ">=0.9.3"',
    "deepspeed-version": 'a shipped DeepSpeed snapshot, prefix or range, e.g. 0.16 or ">=0.16,<0.20"',
    "exclude": "a list of globs",
    "extra-templates": "a list of chat-template names your LLaMA-Factory fork registers",
    "fail-on": "one of error, warning, info",
    "environment": "the packages of the node the job trains on: a requirements or lock file, a snapshot written by "
    '`cfgopt doctor --write-environment`, a table { liger-kernel = "0.6.3" }, or "assumed" (docs/environment.md)',
}
_MENTIONS_TABLE = lazy(r"tool\s*\.\s*[\"']?cfgopt\b")
_CODE_LISTS = ("select", "ignore", "extend-select", "fixable", "unfixable")


class ConfigError(ValueError):
    """A project configuration cannot be used (bad TOML, unknown option, bad value): exit code 2."""


# --------------------------------------------------------------------------- reading


def _toml() -> Any:
    if sys.version_info >= (3, 11):
        import tomllib

        return tomllib
    import tomli  # the `tomli; python_version < "3.11"` dependency

    return tomli


def read_table(path: Path) -> dict[str, Any] | None:
    """The cfgopt options in a config file, unchecked; None for a pyproject.toml without [tool.cfgopt]."""
    try:  # a regular file of bounded size only: never a FIFO (blocks) or a device (endless)
        text = read_bounded(path).decode("utf-8")
    except UnsafeFileError as exc:
        raise ConfigError(str(exc)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{display_path(path)}: cannot read: {exc}") from None
    if path.name == "pyproject.toml" and not _MENTIONS_TABLE.search(text):
        return None  # skip parsing the common case: a pyproject.toml without a [tool.cfgopt] table
    toml = _toml()
    try:
        data = toml.loads(text)
    except toml.TOMLDecodeError as exc:
        raise ConfigError(f"{display_path(path)}: invalid TOML: {exc}") from None
    except RecursionError:  # tomllib parses nested arrays recursively
        raise ConfigError(f"{display_path(path)}: invalid TOML: nested too deeply to read") from None
    if path.name == "pyproject.toml":
        table = data.get("tool", {}).get("cfgopt") if isinstance(data.get("tool"), dict) else None
        return table if isinstance(table, dict) else None
    return data


def find_config(
    folder: Path, cache: dict[str, tuple[Path, dict[str, Any]] | None] | None = None
) -> tuple[Path, dict[str, Any]] | None:
    """The closest config file at or above `folder` (and its raw options), stopping at the filesystem root.
    `cache` (folder -> result) is shared by the lookups of one run, so each folder is looked at once."""
    known = {} if cache is None else cache
    start = realpath(folder)
    visited: list[str] = []
    current = start
    found: tuple[Path, dict[str, Any]] | None = None
    while True:
        if current in known:
            found = known[current]
            break
        visited.append(current)
        for name in CONFIG_NAMES:
            candidate = Path(current) / name
            if _is_file(candidate):
                table = read_table(candidate)
                if table is not None:
                    found = (candidate, table)
                    break
        if found is not None:
            break
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    for folder_seen in visited:
        known[folder_seen] = found
    return found


def _is_file(path: Path) -> bool:
    """Path.is_file, False for a folder that cannot be searched (no permission: the walk reports the folder)."""
    try:
        return path.is_file()
    except OSError:
        return False


# --------------------------------------------------------------------------- checking


def _rule_index() -> tuple[frozenset[str], dict[str, str]]:
    from cfgopt.rules import codes_and_names  # from the rules' catalog: no rule module imported

    return codes_and_names()


def check_codes(values: list[str], where: str) -> list[str]:
    """Rule selectors as written (code, prefix, `ALL` or rule name) -> codes / prefixes; ConfigError if unknown."""
    codes, names = _rule_index()
    out: list[str] = []
    for raw in values:
        if not isinstance(raw, str) or not raw.strip():
            raise ConfigError(f"{where}: {raw!r} is not a rule code")
        value = raw.strip()
        if value in names:
            out.append(names[value])
            continue
        upper = value.upper()
        if upper == "ALL" or any(c.startswith(upper) for c in codes):
            out.append(upper)
            continue
        from cfgopt.text.suggest import closest  # only for an unknown name (start-up)

        hint = closest(upper, sorted(codes)) or closest(value, sorted(names))
        raise ConfigError(f"{where}: unknown rule {value!r}" + (f" (did you mean {hint!r}?)" if hint else ""))
    return out


def _str_list(value: Any, where: str) -> list[str]:
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise ConfigError(f"{where}: expected a list of strings, got {value!r}")


def check_options(table: dict[str, Any], origin: str) -> dict[str, Any]:
    """Validate one layer's options; `origin` names it in messages (a file, or `--config`)."""
    out: dict[str, Any] = {}
    for key, value in table.items():
        where = f"{origin}: {key}"
        if key not in OPTIONS:
            from cfgopt.text.suggest import closest

            hint = closest(key, OPTIONS) or closest(key.replace("_", "-"), OPTIONS)
            raise ConfigError(
                f"{origin}: unknown option {key!r}"
                + (f" (did you mean {hint!r}?)" if hint else f"; options: {', '.join(OPTIONS)}")
            )
        if key == "target":
            try:
                custom_target(value, where) if isinstance(value, dict) else check_name(value, where)
            except TargetError as exc:
                raise ConfigError(str(exc)) from None
        elif key == "gpus":
            if positive_int(value, MAX_GPUS) is None:
                raise ConfigError(f"{where}: expected an integer from 1 to {MAX_GPUS}, got {value!r}")
        elif key in _CODE_LISTS:
            value = check_codes(_str_list(value, where), where)
        elif key in ("exclude", "extra-templates"):
            value = _str_list(value, where)
        elif key == "per-file-ignores":
            if not isinstance(value, dict):
                raise ConfigError(f"{where}: expected {OPTIONS[key]}, got {value!r}")
            value = {g: check_codes(_str_list(c, f"{where}.{g}"), f"{where}.{g}") for g, c in value.items()}
        elif key == "unsafe-fixes":
            if not isinstance(value, bool):
                raise ConfigError(f"{where}: expected true or false, got {value!r}")
        elif key in ("llamafactory-version", "deepspeed-version"):
            if not isinstance(value, str) or not value.strip():
                raise ConfigError(f'{where}: expected a version string such as "0.9.4", got {value!r}')
        elif key == "environment" and not (isinstance(value, dict) or (isinstance(value, str) and value.strip())):
            raise ConfigError(f"{where}: expected {OPTIONS[key]}, got {value!r}")
        elif key == "fail-on" and value not in ("error", "warning", "info"):
            raise ConfigError(f"{where}: expected one of error, warning, info, got {value!r}")
        out[key] = value
    return out


def load_options(path: Path, table: dict[str, Any]) -> dict[str, Any]:
    where = f"{display_path(path)} [tool.cfgopt]" if path.name == "pyproject.toml" else display_path(path)
    return check_options(table, where)


def parse_override(text: str) -> dict[str, Any]:
    """`--config KEY=VALUE`, VALUE in TOML syntax (`select=["LF", "DS"]`); a bare word is taken as a string."""
    if "=" not in text:
        raise ConfigError(f"--config {text!r}: expected KEY=VALUE, e.g. --config 'select=[\"LF\"]'")
    key, _, value = text.partition("=")
    key, value = key.strip(), value.strip()
    toml = _toml()
    try:
        table = toml.loads(f"{_toml_key(key)} = {value}")
    except toml.TOMLDecodeError:
        try:
            table = toml.loads(f"{_toml_key(key)} = {_toml_string(value)}")
        except toml.TOMLDecodeError as exc:
            raise ConfigError(f"--config {text[:80]!r}: not a TOML value: {exc}") from None
        except RecursionError:
            raise ConfigError(f"--config {key!r}: not a TOML value: nested too deeply to read") from None
    except RecursionError:  # tomllib parses nested arrays recursively
        raise ConfigError(f"--config {key!r}: not a TOML value: nested too deeply to read") from None
    return check_options(table, f"--config {key}")


def _toml_key(key: str) -> str:
    return key if key and all(c.isalnum() or c in "-_" for c in key) else _toml_string(key)


def _toml_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


# --------------------------------------------------------------------------- resolving


class CommandLine(Record):
    """What the command line said; None = not given (the config file or the default decides)."""

    target: str | None = None
    gpus: int | None = None
    select: list[str] | None = None
    ignore: tuple[str, ...] | list[str] = ()
    extend_select: tuple[str, ...] | list[str] = ()
    fixable: list[str] | None = None
    unfixable: tuple[str, ...] | list[str] = ()
    fail_on: str | None = None
    unsafe_fixes: bool = False
    llamafactory_version: str | None = None
    deepspeed_version: str | None = None
    force_exclude: bool = False
    environment: str | None = None  # --environment FILE (or "assumed")


def _folder(path: Path) -> str:
    real = realpath(path)
    return real if os.path.isdir(real) else os.path.dirname(real)


class Resolver:
    """Settings per file: defaults < closest config file < `--config` overrides < command-line flags."""

    def __init__(
        self,
        cli: CommandLine | None = None,
        overrides: dict[str, Any] | None = None,
        isolated: bool = False,
        cwd: Path | None = None,
        texts: dict[str, str] | None = None,
    ) -> None:
        self.cli = cli or CommandLine()
        # real path -> text standing in for a file on disk (`with_texts`: a requirement file `cfgopt fix` edited)
        self.texts = texts or {}
        self.overrides = overrides or {}
        self.isolated = isolated
        self.cwd = real_path(cwd or Path.cwd())
        self._by_config: dict[tuple[Path | None, tuple], Settings] = {}
        self._by_folder: dict[str, Settings] = {}
        self._environments: dict[str, Any] = {}
        self._found: dict[str, tuple[Path, dict[str, Any]] | None] = {}
        self._options: dict[Path, dict[str, Any]] = {}
        self._pins: dict[str, dict] = {}

    def with_texts(self, texts: dict[Path, str]) -> Resolver:
        """The same options, with edited requirement files read from `texts` (`cfgopt fix` re-lints with them:
        a pin a fix added changes the job's environment, and so its plan)."""
        from cfgopt.text.requirements.files import is_requirement_file

        edited = {realpath(p): t for p, t in texts.items() if is_requirement_file(Path(p).name)}
        if not edited:
            return self
        return Resolver(self.cli, self.overrides, self.isolated, self.cwd, {**self.texts, **edited})

    def config_for(self, path: Path) -> tuple[Path | None, dict[str, Any]]:
        """The config file that applies to `path` (None: none, or --isolated) and its checked options."""
        if self.isolated:
            return None, {}
        found = find_config(Path(_folder(path)), self._found)
        if found is None:
            return None, {}
        if found[0] not in self._options:
            self._options[found[0]] = load_options(*found)
        return found[0], self._options[found[0]]

    def pins_for(self, folder: str) -> dict:
        """The repository's dependency pins for files in `folder` ({} with --isolated): `cfgopt.environment.pins`."""
        if self.isolated:
            return {}
        from cfgopt.environment.pins import find_pins

        return find_pins(Path(folder), self._pins)

    def settings_for(self, path: Path) -> Settings:
        folder = _folder(path)
        cached = self._by_folder.get(folder)
        if cached is not None:
            return cached
        config_file, options = self.config_for(path)
        pins = self.pins_for(folder)
        env = self.environment_for(folder, config_file, options)
        env_key = (env.source, tuple(sorted(env.packages.items()))) if env is not None else None
        key = (config_file, tuple(sorted(pins.items())), env_key)
        if key not in self._by_config:
            self._by_config[key] = self._build(config_file, options, pins, env)
        self._by_folder[folder] = self._by_config[key]
        return self._by_config[key]

    def environment_for(self, folder: str, config_file: Path | None, options: dict[str, Any]) -> Environment | None:
        """The job's environment as the project states it (cfgopt.environment.stated): `--environment`, else `--config
        environment=` / the config file's `environment`, else the requirement files or a doctor snapshot at or above
        the folder; None: the stated default applies (`Settings.environment`)."""
        from cfgopt.environment import stated

        layers = (
            ("--environment", self.cli.environment, self.cwd),
            ("--config environment", self.overrides.get("environment"), self.cwd),
            (f"{config_file.name if config_file else ''}: environment", options.get("environment"), None),
        )
        for where, value, base in layers:
            if value is not None:
                base = base or (config_file.parent if config_file is not None else self.cwd)
                try:
                    return stated.stated_environment(value, where, base)
                except stated.EnvironmentOptionError as exc:
                    raise ConfigError(str(exc)) from None
        if self.isolated:
            return None
        return stated.found_environment(Path(folder), self._environments, self.texts)

    def _build(
        self,
        config_file: Path | None,
        options: dict[str, Any],
        pins: dict | None = None,
        env: Environment | None = None,
    ) -> Settings:
        from cfgopt.knowledge.versions import VersionError, choose

        cli = self.cli
        merged = {**options, **self.overrides}
        shown_file = display_path(config_file) if config_file is not None else ""
        origin = {k: (f"--config {k}" if k in self.overrides else f"{shown_file}: {k}") for k in merged}

        # rule selection: a layer that selects resets the layers below it (ruff's rule)
        select: list[str] = []
        ignore: list[str] = []
        extend: list[str] = []
        cli_layer = {"select": cli.select, "ignore": list(cli.ignore), "extend-select": list(cli.extend_select)}
        for layer in (options, self.overrides, cli_layer):
            if layer.get("select") is not None:
                select, ignore, extend = list(layer["select"]), [], []
            extend += layer.get("extend-select") or []
            ignore += layer.get("ignore") or []

        fixable = cli.fixable if cli.fixable is not None else list(merged.get("fixable", []))
        unfixable = list(merged.get("unfixable", [])) + list(cli.unfixable)

        versions: dict[str, Any] = {}
        for package, option, flag in (
            ("llamafactory", "llamafactory_version", "llamafactory-version"),
            ("deepspeed", "deepspeed_version", "deepspeed-version"),
        ):
            value = getattr(cli, option) or merged.get(flag)
            where = f"--{flag}" if getattr(cli, option) else origin.get(flag, f"--{flag}")
            stated = _environment_pin(env, package)
            pinned = stated if env is not None and env.explicit and stated else (pins or {}).get(package) or stated
            try:
                # never the interpreter's own install: the job's releases are what the project states, else newest
                choice = choose(package, value, where, pinned, None)
            except VersionError as exc:
                raise VersionError(f"{where}: {exc}") from None
            versions[option] = choice.version
            versions[option.replace("_version", "_range")] = choice.range

        hardware = self._hardware(config_file, options)
        return Settings(
            target_name=hardware.target.name if hardware.target is not None else None,
            target_spec=hardware.target if hardware.target is not None and hardware.target.arch == "custom" else None,
            target_source=hardware.source,
            gpus=hardware.gpus,
            gpus_source=hardware.gpus_source,
            detected=hardware.detected,
            select=select,
            extend_select=extend,
            ignore=ignore,
            fail_on=Severity.parse(cli.fail_on or merged.get("fail-on") or "warning"),
            unsafe_fixes=cli.unsafe_fixes or bool(merged.get("unsafe-fixes", False)),
            per_file_ignores=list(merged.get("per-file-ignores", {}).items()),
            exclude=list(merged.get("exclude", [])),
            extra_templates=list(merged.get("extra-templates", [])),
            fixable=fixable,
            unfixable=unfixable,
            force_exclude=cli.force_exclude,
            root=config_file.parent if config_file is not None else self.cwd,
            config_file=config_file,
            environment=env,
            **versions,
        )

    def _hardware(self, config_file: Path | None, options: dict[str, Any]) -> Resolved:
        """The target and GPU count (`gpus.resolve_target`): the flag, else `--config`, else the config file, else
        the GPUs of this machine; each with the layer it came from."""
        cli = self.cli
        layers = (
            ("--target", "--gpus", {"target": cli.target, "gpus": cli.gpus}),
            ("--config target", "--config gpus", self.overrides),
            (config_file.name if config_file else "", config_file.name if config_file else "", options),
        )
        target, source = next(((lay["target"], t) for t, _, lay in layers if lay.get("target") is not None), (None, ""))
        gpus, gpus_source = next(((lay["gpus"], g) for _, g, lay in layers if lay.get("gpus") is not None), (None, ""))
        if gpus is not None and gpus < 1:
            raise ConfigError("--gpus must be at least 1")
        try:
            return resolve_target(target, source, gpus, gpus_source)
        except TargetError as exc:
            raise ConfigError(str(exc)) from None


def _environment_pin(env: Environment | None, package: str) -> VersionRange | None:
    """A release the stated environment names (a doctor snapshot or an `environment` file), as a pin."""
    if env is None or package not in env.packages or not env.packages[package]:
        return None
    from cfgopt.knowledge.versions import VersionRange

    return VersionRange(package, env.packages[package], env.source)


def _target_toml(settings: Settings) -> str:
    """The target as TOML: its name, or a custom target's table."""
    import json

    spec = settings.target_spec
    if spec is None:
        return json.dumps(settings.target_name)
    vendor = spec.vendor
    return (
        f"{{ name = {json.dumps(spec.name)}, memory-gib = {spec.memory_gib:g}, bf16 = {json.dumps(spec.bf16)}, "
        f"vendor = {json.dumps(vendor)}, fp8 = {json.dumps(spec.fp8)}, tf32 = {json.dumps(spec.tf32)}, "
        f"peak-bf16-tflops = {spec.peak_bf16_tflops:g} }}"
    )


def show_settings(settings: Settings, path: Path) -> str:
    """`--show-settings PATH`: which config file applies and every resolved value, as TOML (a value that is
    not stated, such as `gpus`, is a comment, since TOML has no null)."""
    import json

    def fmt(value: Any) -> str:
        return json.dumps(value)

    lines = [
        f"# settings for {path}",
        f"# config file: {display_path(settings.config_file) if settings.config_file else '(none: defaults)'}",
        f"target = {_target_toml(settings)}  # {settings.target_source or 'stated'}"
        if settings.target_stated
        else "# target: not stated (hardware rules quiet)",
        f"gpus = {fmt(settings.gpus)}  # {settings.gpus_source or 'stated'}"
        if settings.gpus is not None
        else "# gpus: not stated",
        f"select = {fmt(settings.select)}{'  # empty: the default selection' if not settings.select else ''}",
        f"extend-select = {fmt(settings.extend_select)}",
        f"ignore = {fmt(settings.ignore)}",
        f"fixable = {fmt(settings.fixable)}{'  # empty: every rule' if not settings.fixable else ''}",
        f"unfixable = {fmt(settings.unfixable)}",
        f"unsafe-fixes = {fmt(settings.unsafe_fixes)}",
        f"fail-on = {fmt(str(settings.fail_on))}",
        f"llamafactory-version = {fmt(settings.llamafactory_version)}",
        f"deepspeed-version = {fmt(settings.deepspeed_version)}",
        f"# {settings.environment.describe()}",
        *(
            f"# {rng.describe()} -> releases {', '.join(rng.shipped()) or 'none shipped'}"
            for rng in (settings.llamafactory_range, settings.deepspeed_range)
            if rng is not None
        ),
        f"exclude = {fmt(settings.exclude)}",
        f"extra-templates = {fmt(settings.extra_templates)}",
        f"force-exclude = {fmt(settings.force_exclude)}",
        f"excluded = {fmt(settings.is_excluded(path))}  # this path",
        "",
        "[per-file-ignores]",
    ]
    lines += [f"{fmt(glob)} = {fmt(codes)}" for glob, codes in settings.per_file_ignores]
    return "".join(shown(line) + "\n" for line in lines)  # a path, a name or a glob may carry a line break
