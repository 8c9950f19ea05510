"""What `cfgopt lint` and `cfgopt fix` share: their common options, the settings the run resolves, stdin as a
file, and the messages about files that could not be read or none found."""

from __future__ import annotations

import sys
from pathlib import Path

from cfgopt.argtypes import gpu_count, refuse
from cfgopt.commands import UsageError
from cfgopt.job.settings import Settings
from cfgopt.knowledge.targets import NONE, TARGETS

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import NoReturn

    from cfgopt.lint.project_config import Resolver


def rule_codes(text: str) -> list[str]:
    """Rule selectors from the command line; an unknown code or prefix is a usage error (as ruff's
    `Unknown rule selector`), with a did-you-mean."""
    from cfgopt.lint.project_config import ConfigError, check_codes

    try:
        return check_codes([c.strip() for c in text.split(",") if c.strip()], "rule selector")
    except ConfigError as exc:
        refuse(str(exc).removeprefix("rule selector: "))


def add_common_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "paths", nargs="*", type=Path, default=[Path(".")], help="files or folders (default: .); - reads stdin"
    )
    p.add_argument(
        "--stdin-filename",
        type=Path,
        default=None,
        metavar="PATH",
        help="with -: the name stdin is linted as (its kind, messages, project config, DeepSpeed lookup)",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="print findings (or fixed text) and nothing else")
    add_target_arguments(p)
    _add_selection_arguments(p)
    p.add_argument(
        "--llamafactory-version",
        metavar="VERSION",
        default=None,
        help="LLaMA-Factory release to judge configs for: a shipped snapshot, a prefix such as 0.9, or a range "
        "such as '>=0.9.3,<0.9.6' (default: the project config's, else the repository's dependency pins or the "
        "job's environment, else the newest; never this interpreter's install; see docs/versions.md)",
    )
    p.add_argument(
        "--deepspeed-version",
        metavar="VERSION",
        default=None,
        help="DeepSpeed release to judge JSON for, e.g. 0.16, 0.19.8 or a range '>=0.16,<0.20' (DS090 then "
        "compares the releases in it) (default: the project config's, else the repository's dependency pins or "
        "the job's environment, else the newest)",
    )
    p.add_argument(
        "--environment",
        metavar="FILE",
        default=None,
        help="the packages of the node the job trains on: a requirements or lock file, or the snapshot `cfgopt "
        "doctor --write-environment` wrote there; 'assumed' for the stated default (default: the project config's "
        "`environment`, else the job's requirement files, else a cfgopt-environment.json at or above the config, "
        "else LLaMA-Factory's install with the extras a plan uses; never this machine's; docs/environment.md)",
    )
    p.add_argument(
        "--config",
        dest="config_overrides",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="override one project-config option, VALUE in TOML syntax (repeatable): --config 'select=[\"LF\"]'",
    )
    p.add_argument(
        "--isolated",
        "--no-config",
        dest="isolated",
        action="store_true",
        help="ignore every project config file (cfgopt.toml, pyproject.toml [tool.cfgopt]) and the "
        "repository's dependency pins",
    )
    p.add_argument(
        "--show-settings",
        action="store_true",
        help="print the settings resolved for the first path (which config file applies) and exit",
    )
    p.add_argument(
        "--force-exclude",
        action="store_true",
        help="skip paths matching the config's `exclude` even when named on the command line (pre-commit)",
    )
    p.add_argument(
        "--recognised-only",
        action="store_true",
        help="judge named files by content, as files found in a folder: skip empty, unparseable or unrelated "
        "YAML/JSON/shell files silently unless they look like LLaMA-Factory or DeepSpeed configs (pre-commit)",
    )
    p.add_argument("--show-fixes", action="store_true", help="list the fixes (available with lint, applied with fix)")


# `--format` names, one vocabulary for every subcommand (ruff's where ruff has one): `full` is the human report
# (with code frames where there are findings), `concise` one line each; the machine formats as `cfgopt lint`.
FORMATS = ("full", "concise", "json", "json-lines", "github", "sarif", "junit")
# Formats a program reads: `lint` and `fix` write them to stdout and nothing else there (no summary, no diff).
MACHINE_FORMATS = ("json", "json-lines", "sarif", "junit")
FAIL_ON = ("error", "warning", "info")


def _format_name(text: str) -> str:
    """`text`, the name `estimate` and `rules` had for `full`, is still read."""
    return "full" if text == "text" else text


def add_format_argument(p: argparse.ArgumentParser, formats: tuple[str, ...], default: str | None, help: str) -> None:
    """`--format` / `--output-format` (ruff's name), its choices from `FORMATS` (plus `markdown` for tables)."""
    p.add_argument(
        "--format", "--output-format", dest="format", type=_format_name, choices=formats, default=default, help=help
    )


def add_outcome_arguments(p: argparse.ArgumentParser, fail_on_help: str) -> None:
    """`--fail-on`, `--exit-zero` and `--statistics`, which mean the same on every subcommand that reports findings."""
    p.add_argument("--fail-on", choices=FAIL_ON, default=None, help=fail_on_help)
    p.add_argument(
        "--exit-zero",
        action="store_true",
        help="exit 0 even with findings (2 still means a usage error); fix --write then does not list the findings "
        "left (the summary counts them; the pre-commit fix hook leaves them to the lint hook)",
    )
    p.add_argument(
        "--statistics", action="store_true", help="print only a count of findings per rule ([*]: has safe fixes)"
    )


def exit_zero(args: argparse.Namespace, code: int) -> int:
    """`--exit-zero`: findings (1) become 0; usage errors and unreadable files (2) stay."""
    return 0 if args.exit_zero and code == 1 else code


def add_target_arguments(p: argparse.ArgumentParser) -> None:
    """`--target` and `--gpus`, as `lint`, `fix` and `estimate` read them (`gpus.resolve_target`)."""
    p.add_argument(
        "--target",
        default=None,
        choices=[*TARGETS, NONE],
        metavar="NAME",
        help=f"hardware the config is judged for: {', '.join(TARGETS)}; none: no target and no detection "
        "(default: the project config's target, else the GPUs of this machine, else none: hardware checks "
        "are skipped; docs/targets.md)",
    )
    p.add_argument(
        "--gpus",
        type=gpu_count,
        default=None,
        help="GPUs the job will use (default: the project config's, else the count detected with the target, "
        "else not stated)",
    )


def _add_selection_arguments(p: argparse.ArgumentParser) -> None:
    """--select, --ignore, --fixable and the like: rule codes or prefixes, checked as they are parsed."""
    p.add_argument(
        "--select",
        type=rule_codes,
        default=None,
        help="rule codes or prefixes to run, ALL for every rule (default: every rule marked `on` in `cfgopt "
        "rules`, advice such as PF and MEM included; the few opt-in ones need --extend-select); replaces the config's",
    )
    p.add_argument(
        "--extend-select", type=rule_codes, default=[], help="rule codes or prefixes to add to the selection"
    )
    p.add_argument("--ignore", type=rule_codes, default=[], help="rule codes or prefixes to skip")
    p.add_argument(
        "--fixable", type=rule_codes, default=None, help="rule codes or prefixes whose fixes apply (default all)"
    )
    p.add_argument("--unfixable", type=rule_codes, default=[], help="rule codes or prefixes whose fixes never apply")


def settings_from(args: argparse.Namespace) -> tuple[Resolver, Settings]:
    """The settings for the run: the resolver that gives each file its settings (the closest project config
    wins, then `--config` overrides, then the flags; the engine asks it once per file), and the settings of
    the first path, which summaries describe. Raises ConfigError / VersionError (exit 2)."""
    from cfgopt.lint.project_config import CommandLine, Resolver, parse_override

    overrides: dict = {}
    for text in args.config_overrides:
        overrides.update(parse_override(text))
    cli = CommandLine(
        target=args.target,
        gpus=args.gpus,
        select=args.select,
        ignore=args.ignore,
        extend_select=args.extend_select,
        fixable=args.fixable,
        unfixable=args.unfixable,
        fail_on=args.fail_on,
        unsafe_fixes=getattr(args, "unsafe_fixes", False),
        llamafactory_version=args.llamafactory_version,
        deepspeed_version=args.deepspeed_version,
        force_exclude=args.force_exclude,
        environment=args.environment,
    )
    resolver = Resolver(cli, overrides, isolated=args.isolated)
    first = args.paths[0] if args.paths else Path(".")
    from cfgopt.text.user_files import looked_at

    known = looked_at(first) or looked_at(first.parent, "is_dir")
    return resolver, resolver.settings_for(first if known else Path("."))


def show_settings(args: argparse.Namespace, resolver: Resolver) -> int:
    from cfgopt.lint.project_config import show_settings as render_settings
    from cfgopt.lint.report import tolerant

    path = args.paths[0] if args.paths else Path(".")
    tolerant(sys.stdout).write(render_settings(resolver.settings_for(path), path))  # a latin-1 terminal too
    return 0


STDIN = Path("-")


def read_stdin(args: argparse.Namespace) -> dict[Path, str] | None:
    """`-` as the path: stdin's text, linted as --stdin-filename (default stdin.yaml, or stdin.json when it
    starts with `{`). Returns the overlay {path: text} and rewrites `args.paths`; None without `-`.

    Bytes that are not UTF-8 (Latin-1, UTF-16, binary) are held as read (lone surrogates, as a script's are), so
    stdin is read as a file with these bytes is: the same one-line error (`cfg.yaml: error: not UTF-8 text ...`),
    exit 2, and `fix -` echoes them unchanged, as on a parse error: an editor or `| sponge` taking stdout as the
    new text keeps the file."""
    from cfgopt.text.document import real_path, sniffed_text

    if STDIN not in args.paths:
        if args.stdin_filename is not None:
            usage_error(args, "--stdin-filename needs - among the paths")
        return None
    if len(args.paths) > 1:
        usage_error(args, "- (stdin) cannot be combined with other paths")
    from cfgopt.project.project import MAX_FILE_BYTES
    from cfgopt.text.user_files import UnsafeFileError, read_stream

    try:  # bounded as a file is: `< /dev/zero` never reads until memory runs out
        raw = read_stream(sys.stdin.buffer, MAX_FILE_BYTES)
    except UnsafeFileError as exc:  # bad input, not a usage error: one line, exit 2
        raise SystemExit(f"cfgopt: error: {exc}") from None
    # the bytes as read: `Document.from_bytes` judges them as a file's (a BOM is kept, the document records it)
    text = raw.decode("utf-8", "surrogateescape")
    try:
        shown = raw.decode("utf-8").removeprefix("\ufeff").lstrip()
    except UnicodeDecodeError:
        shown = sniffed_text(raw).lstrip()  # only to name it: UTF-16 JSON is still stdin.json
    if args.stdin_filename is not None and args.stdin_filename.is_dir():
        usage_error(args, "--stdin-filename names a folder; give the name of the file stdin stands for")
    name = args.stdin_filename or Path("stdin.json" if shown.startswith("{") else "stdin.yaml")
    args.paths = [name]
    return {real_path(name): text}


def write_file_text(text: str) -> None:
    """A file's text or a diff of it on stdout, as UTF-8 bytes whatever stdout's encoding (`fix -` in an editor
    with a latin-1 locale, `fix > patch`): the bytes are the file's own, so no character is replaced or refused.
    A stream without bytes underneath (a test's StringIO) takes the text."""
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None:
        sys.stdout.write(text)
        return
    sys.stdout.flush()
    try:  # a script's bytes that are not UTF-8 (GBK, Latin-1: lone surrogates as read) go back as they were
        data = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        data = text.encode("utf-8", errors="backslashreplace")
    buffer.write(data)
    buffer.flush()


def usage_error(args: argparse.Namespace, message: str) -> NoReturn:
    """A usage error found after parsing: `cfgopt.cli` prints the subcommand's usage and exits 2."""
    raise UsageError(message)


def print_problems(problems: list, warnings: list = ()) -> None:
    """Files and folders that could not be read (errors: exit 2), then folders a walk skipped (warnings)."""
    from cfgopt.text.document import shown

    for p in problems:  # the path and the message may quote a file's bytes: escaped as the reports do
        sys.stderr.write(f"{shown(str(p.path))}: error: {shown(p.message)}\n")
    for p in warnings:
        sys.stderr.write(f"{shown(str(p.path))}: warning: {shown(p.message)}\n")


def warn_if_nothing_checked(args: argparse.Namespace, result) -> None:
    """As ruff's "No Python files found under the given path(s)": a hint, not an error (exit 0)."""
    if result.files == 0 and not result.problems and not args.quiet and not args.recognised_only:
        from cfgopt.text.document import shown as escaped

        shown = escaped(" ".join(str(p) for p in args.paths))
        sys.stderr.write(
            f"cfgopt: warning: no config files found in {shown} (LLaMA-Factory YAML, DeepSpeed JSON, scripts "
            "calling llamafactory-cli, or requirement files of the training stack: torch, LLaMA-Factory, "
            "DeepSpeed ...)\n"
        )


def render_not_read(not_read: dict[tuple[Path, str], str]) -> None:
    """A note per file a config names that cfgopt did not read (`user_files.ProjectScope`): the reference and
    why, never the file's content. Not an error: the file exists; the real run will read it."""
    from cfgopt.text.document import display_path

    for (config, ref), why in sorted(not_read.items(), key=lambda item: (str(item[0][0]), item[0][1])):
        sys.stderr.write(
            f"note: {display_path(config)}: `{ref}` {why}: not read (name it on the command line to check it)\n"
        )
