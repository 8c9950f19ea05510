"""The files of a run, read once and linked: each file loaded as its consumer loads it, a LLaMA-Factory config
linked to the DeepSpeed JSON it names, a launch line to its YAML, a requirement file to the configs it installs
for; each file's settings asked of the resolver once; each file's `Context` (its links and its job).

`project.loader.load_job` takes one job from it (estimate, verify, tune); the engine (`lint.engine.LintProject`) runs
the rules over it. It reads through an overlay of in-memory texts, so the fixer can re-lint its edited versions
together with the files around them before anything is written.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

from cfgopt.job.settings import Settings, per_file
from cfgopt.knowledge import schema
from cfgopt.loaders import discovery
from cfgopt.loaders.json_loader import load_json
from cfgopt.loaders.yaml_loader import load_yaml
from cfgopt.project import launch_jobs
from cfgopt.text.document import Document, DocumentError, encode, real_path
from cfgopt.text.record import Record
from cfgopt.text.source import Kind, Source
from cfgopt.text.timelimit import TimeLimitExceeded, time_limit
from cfgopt.text.timelimit import message as time_limit_message
from cfgopt.text.user_files import ProjectScope, UnsafeFileError, looked_at, read_bounded

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, TypeVar

    from cfgopt.job.job import Job
    from cfgopt.job.settings import PerFileSettings
    from cfgopt.knowledge.accelerate_plan import AcceleratePlan

MAX_FILE_BYTES = 10 * 1024 * 1024  # configs are kilobytes; past this a file is refused, not read
_NOT_JSON = "is not JSON: the HF Trainer reads it with json.load and stops at start-up"


class FileProblem(Record):
    """A file cfgopt could not read or parse: reported, exit code 2, and the other files still linted."""

    path: Path
    message: str


class Context:
    """What a rule may look at: its file, the settings it is judged with (target, GPU count, versions), and
    the files around it."""

    def __init__(self, source: Source, settings: Settings) -> None:
        self.source = source
        self.settings = settings
        # For a DeepSpeed JSON: the LLaMA-Factory configs that point to it (its consumers, the HF path).
        self.consumers: list[Source] = []
        # For a LLaMA-Factory config: the DeepSpeed JSON its `deepspeed` key resolves to, if found, and that JSON's
        # consumers (this config among them; the speed plan edits a JSON no other config of the run reads).
        self.deepspeed: Source | None = None
        self.deepspeed_consumers: list[Source] = []
        self.deepspeed_searched: list[str] = []
        # Found but not read (outside the project, not a regular file: `user_files.ProjectScope`), and why.
        self.deepspeed_not_read: str | None = None
        # Found and read, but the HF Trainer cannot load it as a DeepSpeed config (not JSON), and why.
        self.deepspeed_invalid: str | None = None
        self.memo: dict[str, Any] = {}  # per-file results rules share (e.g. DS validation)
        # For a requirement file: a consumer's job as its own file is judged (its DeepSpeed file, its settings).
        self.job_of_consumer: Callable[[Source], Job] = self.job_of

    @property
    def job(self) -> Job:
        """The training job of a LLaMA-Factory config (cfgopt.job.job): its values, DeepSpeed, hardware, versions."""
        return self.job_of(self.source, self.deepspeed)

    def job_of(self, config: Source, deepspeed: Source | None = None) -> Job:
        """The job of `config` judged with these settings; for a DeepSpeed JSON, pass a consumer (the JSON is
        then its DeepSpeed file)."""
        from cfgopt.job.job import Job

        consumers = self.deepspeed_consumers if config is self.source else []
        if config is not self.source and deepspeed is None and self.source.kind == Kind.DEEPSPEED:
            deepspeed, consumers = self.source, self.consumers
        jobs = self.memo.setdefault("jobs", {})
        if id(config) not in jobs:
            jobs[id(config)] = Job(config, self.settings, deepspeed, consumers)
        return jobs[id(config)]

    @property
    def lf_label(self) -> str:
        """The LLaMA-Factory release judged, as messages name it (the selected snapshot)."""
        from cfgopt.job.job import lf_label

        return lf_label(self.settings)

    @property
    def ds_label(self) -> str:
        """The DeepSpeed release judged, as messages name it (the selected snapshot)."""
        from cfgopt.job.job import ds_label

        return ds_label(self.settings)


def _overlay_bytes(text: str) -> bytes:
    """An overlay text (an editor's buffer, stdin, a fix's edit) as the bytes its file would hold. An editor may
    send a lone surrogate (U+D800), which no UTF-8 file can hold and no tool can read: DocumentError saying where,
    so the document gets that one line (the language server: a diagnostic at its top) rather than nothing."""
    try:
        return encode(text)
    except UnicodeEncodeError as exc:
        line = text.count("\n", 0, exc.start) + 1
        where = f"U+{ord(text[exc.start]):04X} on line {line}"
        raise DocumentError(
            f"the text holds a lone surrogate ({where}), which UTF-8 cannot encode: it cannot be checked until it "
            "is removed",
            text.encode("utf-8", "replace").decode("utf-8"),  # only to recognise the kind (`_is_ours_unread`)
        ) from None


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
            # text already (stdin, an editor's buffer, a fix's edit): its UTF-8 is read as UTF-8, whatever a
            # requirements file's coding comment says
            doc = Document.from_bytes(path, _overlay_bytes(self.overlay[key]), as_pip_reads=False)
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
            if explicit or kind_hint is not None or self._is_ours_unread(path, exc):
                self.problems.append(FileProblem(path, str(exc)))
            return
        if explicit and not doc.text.strip():
            self.problems.append(FileProblem(path, "empty file: no configuration to check"))
            return
        self._recognise(doc, explicit, kind_hint, sources)

    def _is_ours_unread(self, path: Path, exc: Exception) -> bool:
        """A found file (a walk, pre-commit) that cannot be read: its error is reported only when it is one of
        ours. A file not UTF-8 (UTF-16, Latin-1, binary) is recognised on its text as well as it decodes
        (`DocumentError.sniffed`), as a readable file is, so an unrelated one passes silently as any other
        YAML/JSON does; a file that cannot be opened at all is reported by its suffix."""
        if path.suffix.lower() not in discovery.CONFIG_SUFFIXES:
            return False
        sniffed = exc.sniffed if isinstance(exc, DocumentError) else None
        if sniffed is None:
            return True
        found: list[Source] = []
        self._recognise(Document(path, sniffed), False, None, found)
        return bool(found)

    def _recognise(self, doc: Document, explicit: bool, kind_hint: Kind | None, sources: list[Source]) -> None:
        """Parse a document by its loader and add it to `sources` when it is a kind cfgopt checks (or was named,
        `explicit`, or is named by a config, `kind_hint`)."""
        path = doc.path
        loader = discovery.loader_for(path)
        if kind_hint == Kind.DEEPSPEED:
            loader = "json"
        settings = self.settings_of(path)
        if loader == "requirements":
            from cfgopt.loaders.requirement_files import load_requirements  # the requirement files: only when present

            found = load_requirements(doc, named=explicit)
            sources.extend([found] if found is not None else [])
            if found is not None or path.suffix.lower() not in discovery.CONFIG_SUFFIXES:
                return
            loader = "yaml"  # an environment.yml that names no package judged: read as any YAML file
        if loader == "script":
            from cfgopt.loaders.launch import find_commands  # the shell lexer: for scripts only

            sources.extend(find_commands(doc, settings.lf_schema))
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
            if src.kind == Kind.LF_CLI:
                self._link_accelerate(src)
        launch_jobs.launched_gpus(self.sources)
        launch_jobs.launched_plans(self.sources)
        self._note_launched_gpus()
        for src in list(self.sources):
            if not src.kind.is_llamafactory or src.error is not None or not isinstance(src.data, dict):
                continue
            ref = src.data.get("deepspeed")
            if isinstance(ref, str) and ref:
                self._link_deepspeed(src, ref)
        self._link_requirements()

    def _note_launched_gpus(self) -> None:
        """A file judged for the GPU count its launches state (`launch_jobs.launched_gpus`) says so in the
        summary: its settings carry that count and where it came from, unless `--gpus` or the project config
        stated one."""
        for path, (count, where) in launch_jobs.gpus_by_file(self.sources).items():
            key = real_path(path)
            settings = self.settings_of(path)
            if settings.gpus is None or settings.gpus_source == "detected":
                self.file_settings[key] = launch_jobs.with_launched_gpus(settings, count, where)

    def _link_launch(self, src: Source) -> None:
        """A line naming a YAML: the YAML read and merged under the line's overrides (`cfgopt.project.launch_jobs`); a
        YAML that is nowhere is the line's error; one not read, or named through an expansion, leaves it open."""
        self.context(src)
        word, start, end, literal = src.command["yaml"]
        found, searched = resolve_reference(word, src.document.path) if literal else (None, [])
        if found is None or not self._may_read(found, src, word):
            src.command["open"] = True
            if literal and found is None and not launch_jobs.written_by_script(word, src.command.get("written", ())):
                src.command["launch_errors"].append((start, end, launch_jobs.missing_message(word, searched), None))
            return
        self._note_where_found(word, found, searched, src.document.path)
        self._mark_if_excluded(found)
        self.load(found, explicit=False, kind_hint=Kind.LF_TRAIN)
        for new in self._by_path.get(real_path(found), []):
            self.context(new)
        launch_jobs.attach(src, self._by_path.get(real_path(found), []))

    def _link_accelerate(self, src: Source) -> None:
        """`accelerate launch --config_file X.yaml`: X read (looked for as the YAML the line names is) and its plan
        given to the line's job (`launch_jobs.with_accelerate_plan`); one not found, not read or not a mapping is an
        unknown plan (the memory estimate then leaves the job out, and says why)."""
        named, ref = launch_jobs.accelerate_config(src)
        if not named:
            return
        from cfgopt.knowledge.accelerate_plan import AcceleratePlan  # only for `accelerate launch` lines

        options = src.command.get("launcher_options") or {}
        if ref is None:
            plan = AcceleratePlan("unknown", problem="its path is known only at run time")
        elif "$" in options:  # `accelerate launch $ARGS --config_file x.yaml`: the expansion may override it
            plan = AcceleratePlan("unknown", config=ref, problem="an expansion among accelerate's options")
        else:
            plan = self._read_accelerate(src, ref, options)
        launch_jobs.with_accelerate_plan(src, plan)

    def _read_accelerate(self, src: Source, ref: str, options: dict[str, str | None]) -> AcceleratePlan:
        from cfgopt.knowledge.accelerate_plan import AcceleratePlan, accelerate_plan

        found, _ = resolve_reference(ref, src.document.path)
        if found is None:
            return AcceleratePlan("unknown", config=ref, problem="not found")
        if not self._may_read(found, src, ref):
            return AcceleratePlan("unknown", config=ref, problem="outside the project")
        try:
            loaded = load_yaml(self.read_document(found))
        except (DocumentError, OSError) as exc:
            return AcceleratePlan("unknown", config=ref, problem=f"not readable ({exc})")
        if loaded.error is not None:
            return AcceleratePlan("unknown", config=ref, problem=loaded.error.message)
        return accelerate_plan(loaded.data, options, ref)

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
        configs = [
            src
            for src in self.sources
            if src.kind.is_llamafactory and src.error is None and src.command.get("trainer") != "hf"
        ]
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


if TYPE_CHECKING:
    P = TypeVar("P", bound=Project)  # the class of project a caller asks `build_project` for


def _has_training_keys(data: dict, lf: schema.LlamaFactorySchema) -> bool:
    infer = lf.group("infer")
    train = lf.group("train")
    return (
        any(k in train and k not in infer for k in data)
        or any(k in data for k in ("do_train", "output_dir", "stage"))
        or any(k not in infer for k in data)
    )


def resolve_reference(ref: str, config_path: Path, from_cwd: bool = True) -> tuple[Path | None, list[str]]:
    """Find a file a config names. The real tools resolve it against the launch directory, which a
    linter cannot know; LLaMA-Factory's own examples assume the repository root. So: absolute paths as
    they are, then the current directory (unless not `from_cwd`), the config's folder and every folder above it."""
    ref_path = Path(os.path.expanduser(ref))
    if ref_path.is_absolute():
        return (ref_path if ref_path.is_file() else None), [str(ref_path)]
    searched: list[str] = []
    bases = [Path.cwd()] if from_cwd else []
    folder = real_path(config_path).parent
    bases.append(folder)
    bases.extend(folder.parents)
    for base in dict.fromkeys(bases):
        candidate = base / ref_path
        searched.append(str(candidate))
        if candidate.is_file():
            return candidate, searched
    return None, searched


def missing_reason(path: Path) -> str:
    """Why a named file is not there: it is not, or it cannot be looked at (a folder above it of mode 000)."""
    try:
        os.stat(path)
    except PermissionError as exc:
        return f"cannot be read ({exc.strerror})"
    except OSError as exc:
        return "no such file or directory" if isinstance(exc, FileNotFoundError) else exc.strerror or str(exc)
    return "no such file or directory"


def build_project(
    paths: list[Path],
    settings: Settings | PerFileSettings,
    overlay: dict[Path, str] | None = None,
    recognised_only: bool = False,
    skip: set[Path] | None = None,
    any_reference: bool = False,
    project_class: type[P] = Project,
) -> P:
    """Read and link the files under `paths`. A file a config names is read only inside the project
    (`user_files.ProjectScope`), unless `any_reference` (estimate, verify, tune: they run the job for real)."""
    project = project_class(settings, overlay, recognised_only, skip)
    project.scope = None if any_reference else ProjectScope(paths)
    unreadable: list[tuple[Path, str]] = []
    for path, explicit in discovery.iter_files(paths, unreadable):
        if explicit and not looked_at(path) and real_path(path) not in project.overlay:
            project.problems.append(FileProblem(path, missing_reason(path)))
            continue
        file_settings = project.settings_of(path)
        if (not explicit or file_settings.force_exclude) and file_settings.is_excluded(path):
            continue  # `exclude` in the project config; named files only with --force-exclude (as ruff)
        project.load(path, explicit)
    named = {real_path(p) for p in paths}
    for folder, why in unreadable:  # bad input, as an unreadable file: an error (exit 2), the rest still checked
        if real_path(folder) in named:
            project.problems.append(FileProblem(folder, f"cannot list this folder ({why}); nothing in it is checked"))
        else:
            project.problems.append(FileProblem(folder, f"cannot list this folder ({why}); skipped, the rest checked"))
    project.link()
    return project
