"""Apply fixes: non-overlapping span edits, re-lint, repeat to a fixed point (at most MAX_PASSES), then
verify. Every change is checked by `cfgopt.lint.fix_check` (the file still loads as its consumer loads it,
repeats no key, and changes no value that no fix names) and by the rules (no more errors than before);
a fix that fails either is withheld, with the reason. Every loop here is bounded.

Only files in the write scope are fixed (`write_scope`): the files named on the command line and the files
found under the folders named there, by their real path (a symlink inside a folder pointing outside it is
not followed for writing). A file read only because a config names it (a `deepspeed:` JSON, the YAML of a
`llamafactory-cli train cfg.yaml` line) elsewhere is linted and reported, and fixed only with
`fix_references` (`--fix-references`).

The fix policy is here too (`may_apply`, `strip_unfixable`): a fix applies when its rule is fixable by the
file's settings (`fixable` / `unfixable`, as in ruff) and it is safe, or unsafe with `--unsafe-fixes`. The
engine reports every fix a rule offers; `cfgopt lint` and `cfgopt fix` strip the unfixable ones before they
show findings (`strip_unfixable`), so that such findings are not counted as fixable.
"""

from __future__ import annotations

import bisect
import os
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from cfgopt.job.settings import Settings, judged_with
from cfgopt.lint import unwritable
from cfgopt.lint.engine import LintProject, build_project
from cfgopt.lint.fix_check import apply_edits as _apply_tracked
from cfgopt.lint.fix_check import damage
from cfgopt.lint.unwritable import Unoffered
from cfgopt.loaders import discovery
from cfgopt.plan.speed_knobs import JSON_SPEED_CODES, LEFT_ALONE
from cfgopt.text.diagnostics import Applicability, Diagnostic, Edit, Severity
from cfgopt.text.document import real_path
from cfgopt.text.source import Kind, Source
from cfgopt.text.user_files import looked_at
from cfgopt.text.writer import read_only

TYPE_CHECKING = False
if TYPE_CHECKING:
    from cfgopt.job.settings import PerFileSettings

MAX_PASSES = 10
MAX_ROUNDS = 3

FixId = tuple[Path, str, str, str]


# Why the other part of a fix applied in part was not written, and how to write it (`FixResult.note_partial_fixes`)
OUTSIDE_PART = "that file is not named on the command line; --fix-references writes it"
STDIN_PART = "only the text read from stdin is written; `cfgopt fix` of the saved file with --fix-references writes it"
REFUSED_PART = "that file is not fixed, see why above"
NOT_APPLIED = "its fix there was not applied, see what remains there"
NOT_WRITTEN = "that file was not written, see above"


class PlanPart:
    """An applied fix part of which another file's fix writes (`Fix.other_part`: a speed plan's ZeRO stage, in the
    job's DeepSpeed JSON), so that the fix is said to be applied in part where that file's part is not written.

    A plain class, not a dataclass (`dataclasses` imports `inspect`: 6 ms of a `cfgopt fix` under -X importtime),
    and no record: `noted` is set once the fix is said to be applied in part (`FixResult.note_partial_fixes`)."""

    def __init__(self, key: Path, applied: str, other: Path, other_key: str, words: str, noted: str = "") -> None:
        self.key = key  # the file the fix was applied to
        self.applied = applied  # its entry in `FixResult.applied`
        self.other = other  # the other file (real path)
        self.other_key = other_key  # the key the other part's finding stands on
        self.words = words  # the other part, in words
        self.noted = noted  # its entry in `FixResult.applied` once said to be applied in part


class FixResult:
    """What a fix run did and found, filled in as it runs (`Fixer.result`). A plain class (see `PlanPart`)."""

    def __init__(self) -> None:
        self.originals: dict[Path, str] = {}  # resolved path -> text before
        self.fixed: dict[Path, str] = {}  # resolved path -> text after (changed files only)
        self.applied: dict[Path, list[str]] = {}  # descriptions of the fixes applied
        self.applied_keys: dict[Path, list[str]] = {}  # the key of each fix applied (dotted)
        self.reverted: dict[Path, str] = {}  # file -> why its fixes were dropped
        self.remaining: list[Diagnostic] = []
        self.problems: list = []
        self.bom: dict[Path, bool] = {}
        # Fixes not applied because, applied, they would make the file worse or damage it; the reason by id.
        self.withheld: dict[FixId, Diagnostic] = {}
        self.withheld_why: dict[FixId, str] = {}
        # DeepSpeed JSON speed findings left as they are because every config reading the JSON drops `deepspeed:` by
        # its speed plan (`_left_alone_by_plans`), as they remain
        self.left_alone: list[Diagnostic] = []
        # Files with applicable fixes that cfgopt does not write: outside the write scope, or refused (why).
        self.not_fixed: dict[Path, str] = {}
        self.files = 0  # config files checked (0: a warning, as for lint)
        self.file_settings: dict[Path, Settings] = {}  # each file's, by resolved path
        # references found other than from the current folder (project.project.Project.found_elsewhere)
        self.found_elsewhere: dict[tuple[str, Path], list[Path]] = {}

        self.before: list[Diagnostic] = []  # the findings before any fix
        # references not read (project.project.Project.not_read)
        self.not_read: dict[tuple[Path, str], str] = {}
        self.skipped_folders: list = []  # project.project.Project.skipped_folders
        # a hard-linked file's names, all read by this run and judged together (`_hard_links`): the writer's `names`
        self.links: dict[Path, list[Path]] = {}
        self.plan_parts: list[PlanPart] = []  # applied fixes another file's fix completes
        self.refused: dict[Path, str] = {}  # files no fix is applied to, and why (`_refusals`)
        # findings left with no fix that the job written in block style would get fixed, with why (`lint.unwritable`)
        self.unoffered: list[Unoffered] = []

    def settings_of(self, path: Path) -> Settings:
        """The settings `path` was judged with (the defaults for a file this run did not read)."""
        return judged_with(self.file_settings, path)

    def leave_unfixed(self, paths: set[Path], why: str = NOT_WRITTEN) -> None:
        """`paths` were not written after all (`why`, for a fix another file's part of which they held): take their
        fixes back out of what is reported as fixed, and count their findings as they are on disk."""
        for key in paths:
            self.fixed.pop(key, None)
            self.applied.pop(key, None)
            self.applied_keys.pop(key, None)
        self.remaining = [d for d in self.remaining if real_path(d.path) not in paths] + [
            d for d in self.before if real_path(d.path) in paths
        ]
        self.note_partial_fixes(lambda _: why)

    def note_partial_fixes(self, why: Callable[[Path], str] | None = None) -> None:
        """Each applied fix whose other part (`PlanPart`) was not written is said to be applied in part: which part
        was not, why and how to write it (`why`, of the other file; by default the reason it was refused). Called by
        the command that shows the fixes, which knows what it writes (`cfgopt fix -` writes stdin's text alone)."""
        why = why or self.why_part_unwritten
        for part in self.plan_parts:
            entries = self.applied.get(part.key, [])
            if part.noted or part.applied not in entries:
                continue
            if part.other in self.fixed and part.other_key in self.applied_keys.get(part.other, []):
                continue
            code, _, description = part.applied.partition(" ")
            part.noted = f"{code} in part ({part.words} not written: {why(part.other)}): {description}"
            entries[entries.index(part.applied)] = part.noted

    def why_part_unwritten(self, other: Path) -> str:
        """Why the other part of a fix applied in part, in the file `other`, was not written (`PlanPart`)."""
        refused = self.refused.get(other)
        if refused is None:
            return NOT_APPLIED
        return OUTSIDE_PART if refused == _OUTSIDE else REFUSED_PART


# --------------------------------------------------------------------------- the fix policy


def may_apply(diag: Diagnostic, settings: Settings) -> bool:
    """Does `cfgopt fix` apply this finding's fix, with the settings of the finding's file?"""
    if diag.fix is None:
        return False
    if diag.fix.applicability == Applicability.DISPLAY:
        return False  # shown, never applied
    return settings.is_fixable(diag.code) and (diag.fix.applicability == Applicability.SAFE or settings.unsafe_fixes)


def strip_unfixable(diags: list[Diagnostic], settings_of: Callable[[Path], Settings]) -> None:
    """Take the fix off each finding of a rule its file's project config lists as `unfixable` (or leaves out
    of `fixable`): such findings are reported, never fixed, and not counted as fixable."""
    for d in diags:
        if d.fix is not None and not settings_of(d.path).is_fixable(d.code):
            d.fix = None


# --------------------------------------------------------------------------- applying fixes


def apply_edits(text: str, edits: list[Edit]) -> str:
    return _apply_tracked(text, edits)[0]


def _errors(diags: list[Diagnostic], paths: set[Path]) -> list[tuple[str, str, str]]:
    return sorted(
        (str(real_path(d.path)), d.code, d.key)
        for d in diags
        if d.severity == Severity.ERROR and real_path(d.path) in paths
    )


def _fix_id(diag: Diagnostic) -> FixId:
    assert diag.fix is not None
    return (real_path(diag.path), diag.code, diag.key, diag.fix.description)


def _worse(after: list[Diagnostic], before: list[Diagnostic], job: set[Path]) -> bool:
    """Did a change make its job worse: a file of it unparseable, or more errors in its files together than
    before? `job`: every file the edited file's job reads and every consumer of an edited JSON (`_jobs`), so
    that a YAML edit that breaks the pair with a JSON not written (XF002) counts."""
    if _unparsed(after, job) - _unparsed(before, job):  # a JSON that did not parse before does not block a fix
        return True
    return len(_errors(after, job)) > len(_errors(before, job))


def _unparsed(diags: list[Diagnostic], job: set[Path]) -> set[Path]:
    return {real_path(d.path) for d in diags if d.code == "CFG001" and real_path(d.path) in job}


def _new_errors(after: list[Diagnostic], before: list[Diagnostic], job: set[Path]) -> str:
    """The errors a change adds in its job's files, as `file: CODE` (for the reason a fix is withheld)."""
    from cfgopt.text.document import display_path

    old = Counter(_errors(before, job))
    new = Counter(_errors(after, job)) - old
    return ", ".join(sorted({f"{display_path(Path(path))}: {code}" for path, code, _ in new})) or "an error"


def _jobs(project: LintProject) -> dict[Path, set[Path]]:
    """For each file read, the files of the jobs it is part of (a YAML, its DeepSpeed JSON, the JSON's other
    consumers, the script that runs the YAML): the files linked to it, directly or not, by real path."""
    parent: dict[Path, Path] = {}

    def root(key: Path) -> Path:
        while parent.setdefault(key, key) != key:
            key = parent[key]
        return key

    def join(a: Source, b: Source) -> None:
        parent[root(real_path(a.document.path))] = root(real_path(b.document.path))

    for src in project.sources:
        ctx = project.context(src)
        root(real_path(src.document.path))
        if ctx.deepspeed is not None:
            join(src, ctx.deepspeed)
        for consumer in ctx.consumers:
            join(src, consumer)
        base = src.command.get("base") if src.kind == Kind.LF_CLI else None
        if base is not None:  # the YAML a launch line names (`launch_jobs.attach`): one job
            join(src, base)
    groups: dict[Path, set[Path]] = {}
    for key in list(parent):
        groups.setdefault(root(key), set()).add(key)
    return {key: groups[root(key)] for key in parent}


def write_scope(paths: list[Path], project: LintProject, fix_references: bool) -> set[Path]:
    """Real paths cfgopt may write: files named, files under folders named (by real path), and with
    `fix_references` every file read."""
    if fix_references:
        return set(project.documents)
    named = {real_path(p) for p in paths if not looked_at(p, "is_dir")}
    folders = [real_path(p) for p in paths if looked_at(p, "is_dir")]
    return {k for k in project.documents if k in named or any(k.is_relative_to(f) for f in folders)}


_OUTSIDE = (
    "not named on the command line nor under a folder named there (it is read because a linted config or launch "
    "script names it); "
    "name it, or pass --fix-references"
)
_SYMLINK = "a symlink to a file outside the folders named; cfgopt does not write through it (name the target)"


_UNPARSED = (
    "it does not parse as its consumer reads it (CFG001); cfgopt applies no fix to a file it cannot read: "
    "a removed or changed line could make it parse as something never written"
)
READ_ONLY = "it is read-only; cfgopt does not change its mode (fix it by hand, or make it writable)"
HARD_LINKED = (
    "it has other hard links (names of the same file) that no config of this run reads: a fix written here would "
    "change them too, judged with none of their jobs (copy it to break the link, or name every config that reads "
    "it)"
)


def _hard_links(keys: list[Path], overlay: dict[Path, str]) -> tuple[dict[Path, list[Path]], set[Path]]:
    """The files of the run with other hard links: each name of such a file whose every name the run read ->
    all its names (sorted: the first takes the fixes, the others follow, so that every job reading it is judged
    with the change); and the names of files with a link the run did not read (never written)."""
    by_file: dict[tuple[int, int], list[Path]] = {}
    links: dict[tuple[int, int], int] = {}
    for key in keys:
        if key in overlay:
            continue
        try:
            st = os.lstat(key)
        except OSError:
            continue
        if st.st_nlink > 1:
            by_file.setdefault((st.st_dev, st.st_ino), []).append(key)
            links[(st.st_dev, st.st_ino)] = st.st_nlink
    together: dict[Path, list[Path]] = {}
    unjudged: set[Path] = set()
    for ident, names in by_file.items():
        if len(names) < links[ident]:
            unjudged.update(names)
        else:
            together.update({name: sorted(names) for name in names})
    return together, unjudged


def _refusals(project: LintProject, scope: set[Path], paths: list[Path], before: list[Diagnostic]) -> dict[Path, str]:
    """Files whose fixes are not applied, and why."""
    out: dict[Path, str] = {}
    folders = [Path(os.path.abspath(p)) for p in paths if looked_at(p, "is_dir")]
    together, unjudged = _hard_links(list(project.documents), project.overlay)
    for problem in project.problems:
        out[real_path(problem.path)] = "cfgopt could not check it (see the error above)"
    for diag in before:
        if diag.code == "CFG001":
            out.setdefault(real_path(diag.path), _UNPARSED)
    for key, doc in project.documents.items():
        if key not in scope:
            linked = any(Path(os.path.abspath(doc.path)).is_relative_to(f) for f in folders)
            out.setdefault(key, _SYMLINK if linked else _OUTSIDE)
        elif key not in project.overlay and os.path.exists(key) and read_only(key):
            out.setdefault(key, READ_ONLY)  # refused before planning, so that its job's other files stay in step
        if key in unjudged:
            out.setdefault(key, HARD_LINKED)
        if doc.encoding is not None:  # a requirements file pip decodes otherwise: written back as UTF-8 it would change
            out.setdefault(key, f"pip reads it as {doc.encoding}, not UTF-8; cfgopt writes UTF-8 and does not edit it")
        unusual = doc.unusual_line_break()
        if unusual:
            out.setdefault(
                key, f"it has a line break other than \\n and \\r\\n ({unusual}); cfgopt does not edit such files"
            )
    for names in together.values():  # one name refused: the file is (a write through another changes it)
        why = next((out[name] for name in names if name in out), None)
        if why is not None:
            out.update({name: why for name in names})
    return out


class _Fixer:
    def __init__(
        self,
        paths: list[Path],
        settings: Settings | PerFileSettings,
        recognised_only: bool,
        fix_references: bool,
        given: dict[Path, str],
    ) -> None:
        self.paths, self.settings, self.recognised_only = paths, settings, recognised_only
        self.given = given  # texts that stand in for files on disk (stdin)
        self.result = FixResult()
        project = build_project(paths, settings, dict(given), recognised_only=recognised_only)
        self.settings_of = project.settings_of  # each file's, resolved once (re-lints read the same files)
        self.result.file_settings = project.file_settings
        self.result.found_elsewhere = project.found_elsewhere
        self.before = project.diagnostics()
        self.result.before = list(self.before)
        self.result.not_read = project.not_read
        self.result.skipped_folders = project.skipped_folders
        self.result.problems = project.problems
        self.result.files = len({real_path(src.document.path) for src in project.sources} - project.quiet)
        self.skip = {real_path(p.path) for p in project.problems}
        self.loaders: dict[Path, str] = {}
        self.styled: set[Path] = set()  # LLaMA-Factory YAML with a flow mapping or a merge (`lint.unwritable`)
        for src in project.sources:
            key = real_path(src.document.path)
            self.loaders[key] = _loader_of(src)
            if src.kind.is_llamafactory and self.loaders[key] == "yaml" and unwritable.styled(src):
                self.styled.add(key)
        for key, doc in project.documents.items():
            self.result.originals[key] = doc.text
            self.result.bom[key] = doc.has_bom
        self.refused = _refusals(project, write_scope(paths, project, fix_references), paths, self.before)
        self.result.refused = self.refused
        # findings on a JSON the speed plan leaves alone (its readers drop `deepspeed:`): no later pass fixes them
        self.left_alone = {
            _left_alone_id(d) for d in self.before if d.fix is not None and d.fix.description == LEFT_ALONE
        }
        self.overlay: dict[Path, str] = {}
        self.jobs = _jobs(project)
        self.result.links = _hard_links(list(project.documents), project.overlay)[0]

    def names(self, key: Path) -> list[Path]:
        """Every name of the file `key` (one, or all its hard links: an edit through one is an edit of all)."""
        return self.result.links.get(key, [key])

    def job(self, key: Path) -> set[Path]:
        """The files whose errors a change to `key` may change (`_jobs`; for a hard-linked file, every name's)."""
        return set().union(*(self.jobs.get(name, {name}) for name in self.names(key)))

    def candidates(self, current: list[Diagnostic]) -> list[Diagnostic]:
        out = []
        for d in current:
            if not may_apply(d, self.settings_of(d.path)) or _fix_id(d) in self.result.withheld:
                continue
            if self.left_alone and _left_alone_id(d) in self.left_alone:
                continue
            key = real_path(d.path)
            if key in self.refused:
                self.result.not_fixed.setdefault(key, self.refused[key])
                continue
            if self.names(key)[0] != key:
                continue  # a hard link's other name: fixed through the first, whose text it follows
            out.append(d)
        # a speed plan waits while its file has other fixes to apply: it is made again from the fixed text
        busy = {real_path(d.path) for d in out if not d.fix.planned}  # type: ignore[union-attr]
        out = [d for d in out if not (d.fix.planned and real_path(d.path) in busy)]  # type: ignore[union-attr]
        return self._after_configs(out)

    def _after_configs(self, out: list[Diagnostic]) -> list[Diagnostic]:
        """A DeepSpeed JSON's speed fix (`JSON_SPEED_CODES`) waits while another file of its job has a fix to apply:
        the configs' fixes, their speed plan last, decide whether any config still reads the JSON, and one the
        plan leaves unread is left as it is (its rules judge it again from the fixed texts), in this run as in
        the next."""
        pending = {real_path(d.path) for d in out}

        def waits(d: Diagnostic) -> bool:
            key = real_path(d.path)
            return (
                d.code in JSON_SPEED_CODES
                and self.loaders.get(key) == "json"
                and bool((self.job(key) - {key}) & pending)
            )

        return [d for d in out if not waits(d)]

    def relint(self, texts: dict[Path, str]) -> list[Diagnostic]:
        settings = self.settings
        with_texts = getattr(settings, "with_texts", None)  # a Resolver: an edited requirement file is read as edited
        if with_texts is not None:
            settings = with_texts(texts)
        project = build_project(self.paths, settings, {**self.given, **texts}, self.recognised_only, skip=self.skip)
        return project.diagnostics()

    def text(self, key: Path) -> str:
        return self.overlay.get(key, self.result.originals[key])

    def try_edits(self, key: Path, diags: list[Diagnostic]) -> tuple[str, str | None]:
        edits = [e for d in diags for e in d.fix.edits]  # type: ignore[union-attr]
        lf = self.settings_of(key).lf_schema if self.loaders.get(key) == "script" else None
        return damage(key, self.text(key), edits, self.loaders.get(key, "yaml"), lf)

    def withhold(self, diag: Diagnostic, why: str) -> None:
        self.result.withheld[_fix_id(diag)] = diag
        self.result.withheld_why[_fix_id(diag)] = why

    def accept(self, key: Path, text: str, diags: list[Diagnostic]) -> None:
        for name in self.names(key):
            self.overlay[name] = text
        for d in diags:
            other = d.fix.other_part  # type: ignore[union-attr]
            if other is not None:
                applied = f"{d.code} {d.fix.description}"  # type: ignore[union-attr]
                self.result.plan_parts.append(PlanPart(key, applied, real_path(other.path), other.key, other.words))
        self.result.applied.setdefault(key, []).extend(f"{d.code} {d.fix.description}" for d in diags)  # type:
        # ignore[union-attr]
        self.result.applied_keys.setdefault(key, []).extend(d.key for d in diags)

    def one_pass(self, diags: list[Diagnostic]) -> list[Diagnostic] | None:
        """Apply every non-overlapping fix once; None when there was nothing to apply."""
        chosen = _non_overlapping(self.candidates(diags))
        if not chosen:
            return None
        trial = dict(self.overlay)
        for key in list(chosen):
            kept, text = self.damage_free(key, chosen.pop(key))
            if kept:
                chosen[key] = kept
                trial.update(dict.fromkeys(self.names(key), text))
        if not chosen:  # every fix withheld: progress all the same
            return self.relint(self.overlay)
        trial_diags = self.relint(trial)
        bad = {key for key in chosen if _worse(trial_diags, diags, self.job(key))}
        for key, picked in chosen.items():
            if key not in bad:
                self.accept(key, trial[key], picked)
        diags = self.relint(self.overlay) if bad else trial_diags
        for key in bad:
            diags = self.isolate(key, diags)
        return diags

    def damage_free(self, key: Path, picked: list[Diagnostic]) -> tuple[list[Diagnostic], str]:
        """The fixes of `picked` that pass the damage check together (greedily, in order) and their text;
        one that fails on its own is withheld, one that fails only beside another waits for the next pass.
        No re-lint here: the damage check is a parse, a re-lint is the whole project."""
        text, why = self.try_edits(key, picked)
        if not why:
            return picked, text
        kept: list[Diagnostic] = []
        for diag in picked:
            candidate, why = self.try_edits(key, [*kept, diag])
            if not why:
                kept.append(diag)
                text = candidate
                continue
            alone_why = why if not kept else self.try_edits(key, [diag])[1]
            if alone_why:
                self.withhold(diag, alone_why)
        return kept, (text if kept else self.text(key))

    def isolate(self, key: Path, diags: list[Diagnostic]) -> list[Diagnostic]:
        """The fixes for this file failed together: apply them one at a time instead (fresh offsets after
        each), keeping each one that passes and withholding the others. A fix can be right on its own terms
        and still wrong here, e.g. renaming a misspelt DeepSpeed key that DeepSpeed ignored makes it read the
        key's invalid value. Bounded: each step withholds a fix or applies one, at most 4x the fixes seen."""
        budget = 4 * len(self.candidates(diags)) + 4
        for _ in range(budget):
            mine = [d for d in self.candidates(diags) if real_path(d.path) == key]
            if not mine:
                return diags
            diag = mine[0]
            text, why = self.try_edits(key, [diag])
            if why:
                self.withhold(diag, why)
                continue
            attempt = dict(self.overlay)
            attempt.update(dict.fromkeys(self.names(key), text))
            attempt_diags = self.relint(attempt)
            if _worse(attempt_diags, diags, self.job(key)):
                added = _new_errors(attempt_diags, diags, self.job(key))
                self.withhold(diag, f"it would make its job worse (more errors: {added})")
                continue
            self.accept(key, text, [diag])
            diags = attempt_diags
        for diag in self.candidates(diags):
            if real_path(diag.path) == key:
                self.withhold(diag, "fixes did not converge (please report this)")
        return diags

    def run(self) -> FixResult:
        result = self.result
        diags = self.before
        # A fix withheld in an intermediate state may be fine once the others are in: retry withheld fixes
        # against the final text (a few rounds), so that a second `cfgopt fix` finds nothing to do.
        for round_no in range(MAX_ROUNDS):
            applied_before = sum(len(v) for v in result.applied.values())
            for _ in range(MAX_PASSES):
                after = self.one_pass(diags)
                if after is None:
                    break
                diags = after
            else:
                for key in self.overlay:
                    result.reverted[key] = f"fixes did not converge in {MAX_PASSES} passes (please report this)"
            applied_now = sum(len(v) for v in result.applied.values())
            if not result.withheld or (round_no > 0 and applied_now == applied_before):
                break
            if not any(_fix_id(d) in result.withheld for d in diags if d.fix is not None):
                break
            if round_no + 1 < MAX_ROUNDS:
                result.withheld.clear()
                result.withheld_why.clear()
        self.verify(diags)
        self.explain_unoffered(result.remaining)
        return result

    def explain_unoffered(self, diags: list[Diagnostic]) -> None:
        """The findings with no fix that the job written in block style gets a fix for, with why: the files in
        flow style or with merges linted again in block style (`cfgopt.lint.unwritable`), never written."""
        keys = {real_path(d.path) for d in diags if d.fix is None} & self.styled
        texts = {key: self.text(key) for key in keys if key not in self.refused}
        blocks = {key: block for key in texts if (block := unwritable.block_text(key, texts[key])) is not None}
        if not blocks:
            return
        in_block_style = self.relint({**self.overlay, **blocks})

        def applies(diag: Diagnostic) -> bool:
            return may_apply(diag, self.settings_of(diag.path))

        self.result.unoffered = unwritable.explain(diags, in_block_style, {k: texts[k] for k in blocks}, applies)

    def verify(self, diags: list[Diagnostic]) -> None:
        """Every changed file still parses and has no more errors than before; else it is left as it was."""
        result = self.result
        for key in list(self.overlay):
            if key not in result.reverted and _worse(diags, self.before, self.job(key)):
                new = _new_errors(diags, self.before, self.job(key))
                result.reverted[key] = f"the fixed files are worse than the originals ({new}; please report this)"
        for key in list(result.reverted):  # a hard link's names are reverted together
            for name in self.names(key):
                result.reverted.setdefault(name, result.reverted[key])
        for key in result.reverted:
            self.overlay.pop(key, None)
            result.applied.pop(key, None)
            result.applied_keys.pop(key, None)
        if result.reverted:
            diags = self.relint(self.overlay)
        result.fixed = {k: v for k, v in self.overlay.items() if v != result.originals[k]}
        for key in list(result.applied):  # report only what changes a file, each fix once
            if key not in result.fixed:
                result.applied.pop(key)
                result.applied_keys.pop(key, None)
            else:  # a repeated key fixed twice (its first copy then removed) is one fix
                pairs = list(dict.fromkeys(zip(result.applied[key], result.applied_keys.get(key, []), strict=False)))
                result.applied[key] = [description for description, _ in pairs]
                result.applied_keys[key] = [dotted for _, dotted in pairs]
        if any(s.restricts_fixes for s in result.file_settings.values()):
            strip_unfixable(diags, result.settings_of)
        result.remaining = diags
        result.left_alone = _left_alone_by_plans(self.before, diags)


def _loader_of(src: Source) -> str:
    """The loader the damage check parses a file with: its kind's (an environment.yml read as a YAML config is YAML,
    a DeepSpeed config named otherwise is JSON), else its name's."""
    if src.kind == Kind.DEEPSPEED:
        return "json"
    loader = discovery.loader_for(src.document.path)
    return "yaml" if loader == "requirements" and src.kind != Kind.REQUIREMENTS else loader


def _left_alone_id(diag: Diagnostic) -> tuple[Path, str, str]:
    return real_path(diag.path), diag.code, diag.key


def _left_alone_by_plans(before: list[Diagnostic], after: list[Diagnostic]) -> list[Diagnostic]:
    """The JSON speed findings (`JSON_SPEED_CODES`) whose fix this run leaves unapplied because the plans drop every
    reader of their JSON: fixable before (or already `LEFT_ALONE`), display-only once no config reads the JSON."""
    was = {
        _left_alone_id(d)
        for d in before
        if d.code in JSON_SPEED_CODES
        and d.fix is not None
        and (d.fix.applicability != Applicability.DISPLAY or d.fix.description == LEFT_ALONE)
    }
    return [
        d
        for d in after
        if _left_alone_id(d) in was and d.fix is not None and d.fix.applicability == Applicability.DISPLAY
    ]


def _non_overlapping(candidates: list[Diagnostic]) -> dict[Path, list[Diagnostic]]:
    """The candidates whose edits overlap no edit of one picked before them, by file (the others wait for the next
    pass). Each file's picked spans are kept sorted: a check is a bisection, not a scan of every span picked (a
    1200-line sweep with a fix per line scanned 7 M pairs a pass)."""
    chosen: dict[Path, list[Diagnostic]] = {}
    taken: dict[Path, list[tuple[int, int]]] = {}
    for diag in candidates:
        assert diag.fix is not None
        key = real_path(diag.path)
        spans = taken.setdefault(key, [])
        if any(_clashes(spans, e.start, e.end) for e in diag.fix.edits):
            continue  # overlapping: picked up on the next pass
        for e in diag.fix.edits:
            bisect.insort(spans, (e.start, e.end))
        chosen.setdefault(key, []).append(diag)
    return chosen


def _clashes(spans: list[tuple[int, int]], start: int, end: int) -> bool:
    """Does [start, end) overlap a span of `spans` (pairwise non-overlapping, sorted), or, empty, meet an empty span
    at the same place (two insertions there: their order would be a guess)? Sorted and non-overlapping, the spans'
    ends never decrease, so the last span starting before `end` has the largest end of those that could overlap."""
    if start == end and (start, end) in spans[bisect.bisect_left(spans, (start, end)) :][:1]:
        return True
    before = bisect.bisect_left(spans, (end, end) if start < end else (start, start))
    return before > 0 and spans[before - 1][1] > start


def fix_paths(
    paths: list[Path],
    settings: Settings | PerFileSettings,
    recognised_only: bool = False,
    fix_references: bool = False,
    overlay: dict[Path, str] | None = None,
) -> FixResult:
    """Fix the files under `paths`; `overlay` (resolved path -> text) stands in for files on disk (stdin)."""
    return _Fixer(paths, settings, recognised_only, fix_references, dict(overlay or {})).run()
