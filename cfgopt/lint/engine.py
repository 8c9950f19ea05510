"""Lint a set of paths: discover, load with consumer parity, link each LLaMA-Factory config to the
DeepSpeed JSON it names, run the selected rules, and collect diagnostics.

`Project` is the cross-file view. It reads through an overlay of in-memory texts, so the fixer can
re-lint its edited versions together with the files around them before anything is written.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from cfgopt.job import launch_jobs
from cfgopt.job.settings import PerFileSettings, Settings, judged_with, per_file
from cfgopt.knowledge import schema
from cfgopt.loaders import discovery
from cfgopt.loaders.json_loader import load_json
from cfgopt.loaders.yaml_loader import load_yaml
from cfgopt.plan.speed_knobs import PLANNED_CODES
from cfgopt.rules import codes_and_names, rules_for
from cfgopt.rules.base import Context, ProjectView, Rule
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.document import Document, DocumentError, encode, real_path
from cfgopt.text.source import Kind, Source
from cfgopt.text.timelimit import TimeLimitExceeded, time_limit
from cfgopt.text.timelimit import message as time_limit_message
from cfgopt.text.user_files import ProjectScope, UnsafeFileError, read_bounded

if TYPE_CHECKING:
    from cfgopt.rules.suppressions import RuleCodes

MAX_FILE_BYTES = 10 * 1024 * 1024  # configs are kilobytes; past this a file is refused, not read
_NOT_JSON = "is not JSON: the HF Trainer reads it with json.load and stops at start-up"


class FileProblem(NamedTuple):
    """A file cfgopt could not read or parse: reported, exit code 2, and the other files still linted."""

    path: Path
    message: str


class Project:
    def __init__(
        self,
        settings: Settings | PerFileSettings,
        overlay: dict[Path, str] | None = None,
        recognised_only: bool = False,
        skip: set[Path] | None = None,
    ) -> None:
        self._resolve = per_file(settings)
        # Each file's settings (by resolved path), asked of the resolver once per file: `settings_of`.
        self.file_settings: dict[Path, Settings] = {}
        self.overlay: dict[Path, str] = dict(overlay or {})
        self.sources: list[Source] = []
        self.documents: dict[Path, Document] = {}
        self.problems: list[FileProblem] = []
        self.contexts: dict[int, Context] = {}
        self.recognised_only = recognised_only  # named files are judged by content like found ones (pre-commit)
        # Files read only because a linted config names them, but excluded by the project config: they give
        # the linted config its context (XF rules) and get no diagnostics of their own.
        self.quiet: set[Path] = set()
        # Files not read (again): the fixer's re-lints skip a file that could not be checked the first time.
        self.skip: set[Path] = set(skip or ())
        self._by_path: dict[Path, list[Source]] = {}
        # Skip rules none of whose trigger keys a file has (`Rule.triggers`); False in tests comparing findings.
        self.skip_untriggered = True
        # References found other than from the current folder (the launch folder the real tools resolve them
        # from): (the reference as written, the folder it was found from) -> the configs naming it.
        self.found_elsewhere: dict[tuple[str, Path], list[Path]] = {}
        # Which files a config may make cfgopt read (None: any, for callers that run the job for real), and
        # the references not read: (the naming config, the reference as written) -> why.
        self.scope: ProjectScope | None = None
        self.not_read: dict[tuple[Path, str], str] = {}
        self.skipped_folders: list[FileProblem] = []  # folders found in a walk that cannot be listed: warned of

    def settings_of(self, path: Path) -> Settings:
        """The settings that judge `path`: resolved once per file, then carried by its rule context."""
        key = real_path(path)
        found = self.file_settings.get(key)
        if found is None:
            found = self.file_settings[key] = self._resolve(path)
        return found

    def context(self, src: Source) -> Context:
        ctx = self.contexts.get(id(src))
        if ctx is None:
            ctx = self.contexts[id(src)] = Context(src, self.settings_of(src.document.path))
        return ctx

    # ---------------------------------------------------------------- reading
    def read_document(self, path: Path) -> Document:
        key = real_path(path)
        if key in self.documents:
            return self.documents[key]
        if key in self.overlay:
            doc = Document.from_bytes(path, encode(self.overlay[key]))
            original = self._read_original(path)
            doc.has_bom = doc.has_bom or (original.has_bom if original else False)  # stdin keeps its own BOM
        else:
            st = path.stat()
            if not stat.S_ISREG(st.st_mode):
                # a FIFO would block the read forever; a device or socket is not a config
                raise DocumentError("not a regular file (FIFO, device or socket)")
            size = st.st_size
            if size > MAX_FILE_BYTES:
                raise DocumentError(
                    f"file is {size / 1e6:.0f} MB; cfgopt reads configs up to {MAX_FILE_BYTES // (1024 * 1024)} MiB"
                )
            try:  # read with the checks made again on the open file: it may have changed since the stat
                doc = Document.from_bytes(path, read_bounded(path, MAX_FILE_BYTES))
            except UnsafeFileError as exc:
                raise DocumentError(str(exc).removeprefix(f"{path}: ")) from None
            except OSError as exc:
                raise DocumentError(exc.strerror or str(exc)) from None
        self.documents[key] = doc
        return doc

    @staticmethod
    def _read_original(path: Path) -> Document | None:
        """The file on disk behind an overlay text (for its BOM); None when there is no readable regular file
        (`--stdin-filename` may name a FIFO, which must not block the run)."""
        try:
            return Document.from_bytes(path, read_bounded(path, MAX_FILE_BYTES))
        except (DocumentError, OSError):
            return None

    def load(self, path: Path, explicit: bool, kind_hint: Kind | None = None) -> list[Source]:
        """Read and parse a file. `explicit`: named on the command line, so a file that is empty or does not
        parse is reported even when it does not look like a config (unless `recognised_only`, for pre-commit,
        which names every YAML/JSON/shell file of a repository)."""
        key = real_path(path)
        if key in self._by_path:
            return self._by_path[key]
        sources: list[Source] = []
        self._by_path[key] = sources
        if explicit and self.recognised_only:
            explicit = False
        if key in self.skip:
            return sources
        try:
            with time_limit():
                self._parse(path, explicit, kind_hint, sources)
        except TimeLimitExceeded as exc:
            self.problems.append(FileProblem(path, time_limit_message(exc, "reading it")))
            sources.clear()
            self.skip.add(key)
        self.sources.extend(sources)
        return sources

    def _parse(self, path: Path, explicit: bool, kind_hint: Kind | None, sources: list[Source]) -> None:
        try:
            doc = self.read_document(path)
        except (DocumentError, OSError) as exc:
            if explicit or kind_hint is not None or path.suffix.lower() in discovery.CONFIG_SUFFIXES:
                self.problems.append(FileProblem(path, str(exc)))
            return
        if explicit and not doc.text.strip():
            self.problems.append(FileProblem(path, "empty file: no configuration to check"))
            return
        loader = discovery.loader_for(path)
        if kind_hint == Kind.DEEPSPEED:
            loader = "json"
        settings = self.settings_of(path)
        if loader == "script":
            from cfgopt.loaders.command_loader import find_commands  # the shell lexer: for scripts only

            sources.extend(find_commands(doc, settings.lf_schema))
        elif loader == "requirements":
            from cfgopt.loaders.requirement_files import load_requirements  # the requirement files: only when present

            found = load_requirements(doc)
            sources.extend([found] if found is not None else [])
        elif loader == "json":
            src = load_json(doc)
            if src.error is None:
                src.kind = kind_hint or discovery.classify_json(src.data)
            elif kind_hint or discovery.looks_like_ours(doc.text, "json") or explicit:
                src.kind = kind_hint or Kind.DEEPSPEED
            if src.kind != Kind.UNKNOWN:
                sources.append(src)
        else:
            src = load_yaml(doc)
            lf = settings.lf_schema
            if src.error is None:
                src.kind = discovery.classify_yaml(src.data, set(lf.fields))
                if src.kind == Kind.LF_TRAIN and not _has_training_keys(src.data, lf):
                    src.kind = Kind.LF_INFER
            elif kind_hint or discovery.looks_like_ours(doc.text, "yaml") or explicit:
                src.kind = kind_hint or Kind.LF_TRAIN
            if src.kind != Kind.UNKNOWN:
                sources.append(src)

    # ---------------------------------------------------------------- linking
    def link(self) -> None:
        for src in list(self.sources):
            if src.kind == Kind.LF_CLI and src.command.get("yaml"):
                self._link_launch(src)
        launch_jobs.launched_gpus(self.sources)
        for src in list(self.sources):
            if not src.kind.is_llamafactory or src.error is not None or not isinstance(src.data, dict):
                continue
            ref = src.data.get("deepspeed")
            if isinstance(ref, str) and ref:
                self._link_deepspeed(src, ref)
        self._link_requirements()

    def _link_launch(self, src: Source) -> None:
        """A line naming a YAML: the YAML read and merged under the line's overrides (`cfgopt.job.launch_jobs`); a
        YAML that is nowhere is the line's error; one not read, or named through an expansion, leaves it open."""
        self.context(src)
        word, start, end, literal = src.command["yaml"]
        found, searched = resolve_reference(word, src.document.path) if literal else (None, [])
        if found is None or not self._may_read(found, src, word):
            src.command["open"] = True
            if literal and found is None:
                src.command["launch_errors"].append((start, end, launch_jobs.missing_message(word, searched), None))
            return
        self._note_where_found(word, found, searched, src.document.path)
        self._mark_if_excluded(found)
        self.load(found, explicit=False, kind_hint=Kind.LF_TRAIN)
        for new in self._by_path.get(real_path(found), []):
            self.context(new)
        launch_jobs.attach(src, self._by_path.get(real_path(found), []))

    def _link_deepspeed(self, src: Source, ref: str) -> None:
        ctx = self.context(src)
        found, searched = resolve_reference(ref, src.document.path)
        ctx.deepspeed_searched = searched
        if found is None:
            return
        if not self._may_read(found, src, ref):
            ctx.deepspeed_not_read = self.not_read[(real_path(src.document.path), ref)]
            return
        self._note_where_found(ref, found, searched, src.document.path)
        self._mark_if_excluded(found)
        for ds in self._load_deepspeed(found, ctx):
            ds_ctx = self.context(ds)
            ds_ctx.consumers.append(src)
            ctx.deepspeed, ctx.deepspeed_consumers = ds, ds_ctx.consumers

    def _may_read(self, found: Path, config: Source, ref: str) -> bool:
        """May the file a config names be read (`user_files.ProjectScope`)? When not, remember why, for a
        note that names the reference and never shows the file's content."""
        if self.scope is None or real_path(found) in self.overlay:
            return True
        why = self.scope.refusal(found, config.document.path)
        if why is not None:
            self.not_read[(real_path(config.document.path), ref)] = why
        return why is None

    def _load_deepspeed(self, found: Path, ctx: Context) -> list[Source]:
        """The DeepSpeed sources of a file a `deepspeed:` key names. The HF Trainer `json.load`s whatever the
        key names: a file that is not JSON (a LLaMA-Factory YAML) is the naming config's error, reported there
        (LF005, `ctx.deepspeed_invalid`) whether or not the file itself is named and linted."""
        key = real_path(found)
        if key in self.skip or any(real_path(p.path) == key for p in self.problems):
            ctx.deepspeed_not_read = "could not be read (see the error above)"
            return []
        loaded = self._by_path.get(key)
        if loaded and any(s.kind == Kind.DEEPSPEED for s in loaded):
            return [s for s in loaded if s.kind == Kind.DEEPSPEED]
        if loaded or found.suffix.lower() != ".json":
            try:
                doc = self.read_document(found)
            except (DocumentError, OSError):
                doc = None  # reported by `load` below
            if doc is not None and load_json(doc).error is not None:
                ctx.deepspeed_invalid = _NOT_JSON
                return []
            if loaded:  # JSON read as a config of another kind (a flow-style YAML): not judged as DeepSpeed's
                ctx.deepspeed_not_read = "is read as a LLaMA-Factory config, not as a DeepSpeed one"
                return []
        self._by_path.pop(key, None)  # read before as a file of no known kind: read again as DeepSpeed's
        return self.load(found, explicit=False, kind_hint=Kind.DEEPSPEED)

    def _link_requirements(self) -> None:
        """A requirement file's consumers: the LLaMA-Factory configs of the run at or below its folder, the jobs
        it installs for (ENV003 asks whether one of them uses bitsandbytes)."""
        files = [src for src in self.sources if src.kind == Kind.REQUIREMENTS]
        configs = [src for src in self.sources if src.kind.is_llamafactory and src.error is None]
        for req in files:
            folder = real_path(req.document.path).parent
            found = [c for c in configs if folder in real_path(c.document.path).parents]
            ctx = self.context(req)
            ctx.consumers.extend(found)
            ctx.job_of_consumer = lambda config: self.context(config).job  # with its own DeepSpeed file and settings

    def _note_where_found(self, ref: str, found: Path | None, searched: list[str], config: Path) -> None:
        """Remember a reference found from the config's folder or one above it rather than the current one: the
        real tools resolve it from the folder they are launched in, so the run is judged on an assumption."""
        ref_path = Path(os.path.expanduser(ref))
        if found is None or ref_path.is_absolute() or str(found) == searched[0]:
            return
        base = found  # `resolve_reference` joined a folder and the reference as written: take the reference off
        for _ in ref_path.parts:
            base = base.parent
        self.found_elsewhere.setdefault((ref, base), []).append(config)

    def _mark_if_excluded(self, path: Path) -> None:
        key = real_path(path)
        if key not in self._by_path and self.settings_of(path).is_excluded(path):
            self.quiet.add(key)

    # ---------------------------------------------------------------- rules
    def diagnostics(self) -> list[Diagnostic]:
        rules = self._rules_needed()
        out: list[Diagnostic] = []
        seen: set[tuple[str, int, int, str, str]] = set()
        owners: dict[int, Source] = {}  # diagnostic -> the config it judged (the planner needs its job)
        for src in self.sources:
            key = real_path(src.document.path)
            if key in self.quiet or key in self.skip:
                continue
            try:
                with time_limit():
                    found = self._check(src, rules)
            except TimeLimitExceeded as exc:
                self.problems.append(FileProblem(src.document.path, time_limit_message(exc, "checking it")))
                self.skip.add(key)
                continue
            for diag in found:
                ident = (str(diag.path), diag.start, diag.end, diag.code, diag.message)
                if ident not in seen:
                    seen.add(ident)
                    out.append(diag)
                    owners[id(diag)] = src
        out = [d for d in out if real_path(d.path) not in self.skip]
        out = launch_jobs.drop_repeated(out, owners, real_path)
        suppressing = self._may_suppress()
        matched = None
        if suppressing:  # kept off the common path: nothing to suppress, nothing imported
            from cfgopt.rules import suppressions

            out, matched = suppressions.apply_suppressions(self.sources, self.quiet, self.settings_of, _rule_codes, out)
        view = ProjectView(self.settings_of, matched)
        for rule in rules:
            out.extend(rule.check_project(view))
        out.sort(key=Diagnostic.sort_key)
        out = _once_per_run(out, {r.code for r in rules if r.once_per_run})
        if any(d.code in PLANNED_CODES for d in out):
            from cfgopt.plan.planner import attach_plans  # only when there is something to plan: it loads tune's priors

            attach_plans(self.context, out, owners, self.quiet | self.skip)  # speed fixes planned together
        return out

    def _check(self, src: Source, rules: list) -> list[Diagnostic]:
        ctx = self.context(src)
        found: list[Diagnostic] = []
        for rule in rules:
            if src.kind not in rule.kinds or not ctx.settings.is_selected(rule.code):
                continue
            if src.error is not None and rule.code != "CFG001":
                continue
            try:
                found.extend(rule.check(ctx))
            except RecursionError:
                self.problems.append(
                    FileProblem(src.document.path, "nested too deeply for cfgopt to check; this file is not checked")
                )
                return []
            except TimeLimitExceeded:
                raise
            except Exception as exc:  # noqa: BLE001 - one broken rule must not stop the other files
                self.problems.append(
                    FileProblem(
                        src.document.path,
                        f"internal error in {rule.code} ({type(exc).__name__}: {exc}); please report this",
                    )
                )
        if src.command.get("unknown"):
            found = [d for d in found if not launch_jobs.about_unknown(d, src)]
        return found

    def _rules_needed(self) -> tuple[Rule, ...]:
        """The rules for the kinds of file linted and selected for one of them: only these are imported."""
        linted = [src for src in self.sources if real_path(src.document.path) not in self.quiet]
        settings = {id(s): s for s in (self.context(src).settings for src in linted)}.values()
        keys: dict[Kind, set[str]] = {}
        for src in linted:
            keys.setdefault(src.kind, set()).update(src.data if isinstance(src.data, dict) else ())

        def selected(code: str) -> bool:
            return any(s.is_selected(code) for s in settings)

        return rules_for({src.kind for src in linted}, selected, keys if self.skip_untriggered else None)

    def _may_suppress(self) -> bool:
        """Is there anything for `cfgopt.rules.suppressions` to do (kept off the common path: it is not imported
        for a project without suppression comments or per-file ignores)?"""
        if self.quiet or any(s.per_file_ignores for s in self.file_settings.values()):
            return True
        return any("cfgopt" in doc.text.lower() for doc in self.documents.values())


def _once_per_run(diags: list[Diagnostic], codes: set[str]) -> list[Diagnostic]:
    """A rule that notes something about the run rather than a file (`Rule.once_per_run`) reports once: on its
    first file, counting the others."""
    if not codes:
        return diags
    first: dict[str, Diagnostic] = {}
    others: dict[str, int] = {}
    kept = []
    for d in diags:
        if d.code not in codes:
            kept.append(d)
        elif d.code in first:
            others[d.code] = others.get(d.code, 0) + 1
        else:
            first[d.code] = d
            kept.append(d)
    for code, n in others.items():
        first[code].message += f" (and {n} more such file(s) in this run)"
    return kept


def _rule_codes() -> RuleCodes:
    """Every rule's code and name, for the codes written in suppression comments."""
    from cfgopt.rules.suppressions import RuleCodes

    return RuleCodes(*codes_and_names())


def _has_training_keys(data: dict, lf: schema.LlamaFactorySchema) -> bool:
    infer = lf.group("infer")
    train = lf.group("train")
    return (
        any(k in train and k not in infer for k in data)
        or any(k in data for k in ("do_train", "output_dir", "stage"))
        or any(k not in infer for k in data)
    )


def resolve_reference(ref: str, config_path: Path) -> tuple[Path | None, list[str]]:
    """Find a file a config names. The real tools resolve it against the launch directory, which a
    linter cannot know; LLaMA-Factory's own examples assume the repository root. So: absolute paths as
    they are, then the current directory, the config's folder and every folder above it."""
    ref_path = Path(os.path.expanduser(ref))
    if ref_path.is_absolute():
        return (ref_path if ref_path.is_file() else None), [str(ref_path)]
    searched: list[str] = []
    bases = [Path.cwd()]
    folder = real_path(config_path).parent
    bases.append(folder)
    bases.extend(folder.parents)
    for base in dict.fromkeys(bases):
        candidate = base / ref_path
        searched.append(str(candidate))
        if candidate.is_file():
            return candidate, searched
    return None, searched


class LintResult:
    def __init__(
        self,
        diagnostics: list[Diagnostic],
        problems: list[FileProblem],
        files: int,
        checked: list[Path] | None = None,
        file_settings: dict[Path, Settings] | None = None,
        found_elsewhere: dict[tuple[str, Path], list[Path]] | None = None,
        not_read: dict[tuple[Path, str], str] | None = None,
        skipped_folders: list[FileProblem] | None = None,
    ) -> None:
        self.diagnostics = diagnostics
        self.problems = problems
        self.files = files
        self.checked: list[Path] = checked or []  # the files linted (resolved), in path order
        self.file_settings: dict[Path, Settings] = file_settings or {}  # each file's, by resolved path
        self.found_elsewhere = found_elsewhere or {}  # Project.found_elsewhere
        self.not_read = not_read or {}  # Project.not_read
        self.skipped_folders = skipped_folders or []  # Project.skipped_folders

    def settings_of(self, path: Path) -> Settings:
        """The settings `path` was judged with (the defaults for a file this run did not read)."""
        return judged_with(self.file_settings, path)

    def exit_code(self, fail_on: Severity | None = None) -> int:
        """2 on a problem or parse error, 1 on a finding at or above `fail_on` (default: each file's
        own `fail-on`), else 0."""
        if self.problems or any(d.code == "CFG001" for d in self.diagnostics):
            return 2
        return 1 if any(d.severity >= (fail_on or self.settings_of(d.path).fail_on) for d in self.diagnostics) else 0


def build_project(
    paths: list[Path],
    settings: Settings | PerFileSettings,
    overlay: dict[Path, str] | None = None,
    recognised_only: bool = False,
    skip: set[Path] | None = None,
    any_reference: bool = False,
) -> Project:
    """Read and link the files under `paths`. A file a config names is read only inside the project
    (`user_files.ProjectScope`), unless `any_reference` (estimate, verify, tune: they run the job for real)."""
    project = Project(settings, overlay, recognised_only, skip)
    project.scope = None if any_reference else ProjectScope(paths)
    unreadable: list[tuple[Path, str]] = []
    for path, explicit in discovery.iter_files(paths, unreadable):
        if explicit and not path.exists() and real_path(path) not in project.overlay:
            project.problems.append(FileProblem(path, "no such file or directory"))
            continue
        file_settings = project.settings_of(path)
        if (not explicit or file_settings.force_exclude) and file_settings.is_excluded(path):
            continue  # `exclude` in the project config; named files only with --force-exclude (as ruff)
        project.load(path, explicit)
    named = {real_path(p) for p in paths}
    for folder, why in unreadable:  # a folder named that cannot be listed is an error; one found inside, a warning
        if real_path(folder) in named:
            project.problems.append(FileProblem(folder, f"cannot list this folder ({why}); nothing in it is checked"))
        else:
            project.skipped_folders.append(FileProblem(folder, f"cannot list this folder ({why}); skipped"))
    project.link()
    return project


def lint_paths(
    paths: list[Path],
    settings: Settings | PerFileSettings,
    recognised_only: bool = False,
    overlay: dict[Path, str] | None = None,
) -> LintResult:
    """Lint the files under `paths` with `settings` (one for every file, or a resolver giving each file its
    own); `overlay` (resolved path -> text) stands in for files on disk (stdin)."""
    project = build_project(paths, settings, overlay, recognised_only=recognised_only)
    checked = sorted({real_path(src.document.path) for src in project.sources} - project.quiet)
    diagnostics = project.diagnostics()
    return LintResult(
        diagnostics,
        project.problems,
        len(checked),
        checked,
        project.file_settings,
        project.found_elsewhere,
        project.not_read,
        project.skipped_folders,
    )
