"""Lint a set of paths: the project's files read and linked (`project.project`), then the selected rules run over
them, the suppressions applied, the project-level rules and the speed plans, and the diagnostics collected.

`LintProject` is the project as the engine lints it. It reads through an overlay of in-memory texts, so the fixer
can re-lint its edited versions together with the files around them before anything is written.
"""

from __future__ import annotations

from pathlib import Path

from cfgopt.job.settings import Settings, judged_with
from cfgopt.knowledge.targets import HARDWARE_CHECKS
from cfgopt.project import launch_jobs
from cfgopt.project import project as job_project
from cfgopt.project.project import FileProblem, Project
from cfgopt.rules import codes_and_names, rules_for
from cfgopt.rules.base import ProjectView, Rule
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.document import real_path
from cfgopt.text.real_paths import one_run
from cfgopt.text.source import Kind, Source
from cfgopt.text.timelimit import TimeLimitExceeded, time_limit
from cfgopt.text.timelimit import message as time_limit_message

TYPE_CHECKING = False
if TYPE_CHECKING:
    from cfgopt.job.settings import PerFileSettings
    from cfgopt.rules.suppressions import RuleCodes


class LintProject(Project):
    """The project as the engine lints it: its files (`project.project.Project`) and the rules run over them."""

    # Skip rules none of whose trigger keys a file has (`Rule.triggers`); False in tests comparing findings.
    skip_untriggered = True

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
        planned = frozenset(r.code for r in rules if r.fix_replaced_by_plan)  # the rules whose fix the plan writes
        if any(d.code in planned for d in out):
            from cfgopt.lint.plans import attach_plans  # only when there is something to plan: it loads tune's priors

            attach_plans(self.context, out, owners, planned, self.quiet | self.skip)  # speed fixes planned together
        if any(d.code == "ENV004" and d.fix is not None for d in out):
            from cfgopt.lint.plans import keep_pins_with_their_plans

            keep_pins_with_their_plans(self.context, out, owners, planned)  # a pin only with the plan that uses it
        return out

    def _check(self, src: Source, rules: list) -> list[Diagnostic]:
        ctx = self.context(src)
        found: list[Diagnostic] = []
        for rule in rules:
            if src.kind not in rule.kinds or not ctx.settings.is_selected(rule.code):
                continue
            if not launch_jobs.judged_as_hf_trainer(src, rule.code):
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
            found = keys.setdefault(src.kind, set())
            if isinstance(src.data, dict):
                found.update(src.data)  # each key, and `key=value` for a text value (`Rule.triggers`: `stage=ppo`)
                found.update(f"{key}={value}" for key, value in src.data.items() if isinstance(value, str))

        def selected(code: str) -> bool:
            # a hardware check says nothing without a target (tests/knowledge/test_targets.py): not even imported then
            return any(s.is_selected(code) and (s.target_stated or code not in HARDWARE_CHECKS) for s in settings)

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
) -> LintProject:
    """Read and link the files under `paths` (`project.project.build_project`), ready for the rules."""
    return job_project.build_project(paths, settings, overlay, recognised_only, skip, any_reference, LintProject)


def lint_paths(
    paths: list[Path],
    settings: Settings | PerFileSettings,
    recognised_only: bool = False,
    overlay: dict[Path, str] | None = None,
) -> LintResult:
    """Lint the files under `paths` with `settings` (one for every file, or a resolver giving each file its
    own); `overlay` (resolved path -> text) stands in for files on disk (stdin). One run: each real path is asked
    of the file system once (`real_paths.one_run`)."""
    with one_run():
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
