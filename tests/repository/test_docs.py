"""Rule docs stay in one place (the rule modules) and the generated copies stay in sync."""

from __future__ import annotations

import sys

from rule_cases import ROOT

from cfgopt.rules import all_rules

sys.path.insert(0, str(ROOT / "scripts"))
from gen_rule_docs import RULES_DIR, render


def test_generated_rule_docs_are_current() -> None:
    expected = render()
    for path, text in expected.items():
        assert path.read_text() == text, f"{path.relative_to(ROOT)} is stale: run scripts/gen_rule_docs.py"
    assert set(RULES_DIR.glob("*.md")) == {p for p in expected if p.parent == RULES_DIR}


def test_every_rule_is_documented() -> None:
    for rule in all_rules():
        doc = rule.docs()
        assert doc["why"] and doc["fails_when"] and doc["evidence"] and doc["example"], rule.code
        assert rule.name == rule.name.lower() and " " not in rule.name


# --------------------------------------------------------------------------------------------- links and paths
# Everything a user is pointed to is in the repository: a Markdown link, or a path such as
# `bench/h200/measurements.md` named in a doc, a rule's evidence or a fixture's comment, resolves in a clone.

import re  # noqa: E402
import subprocess  # noqa: E402
from pathlib import Path  # noqa: E402

_LINK = re.compile(r"\]\(([^)\s]+)\)")
# Paths of this repository as docs name them. Upstream files (LLaMA-Factory's `scripts/...`, ruff's
# `docs/linter.md`) are cited with their project's name and are not matched: `tests/`, `scripts/` and plain
# `docs/` are too common upstream to tell apart, so only these prefixes are held to resolve here.
_REPO_PATH = re.compile(
    r"(?<![\w./-])((?:bench/|fixtures/|cfgopt/|docs/evidence/|rules/[A-Z]+\d+\.md|docs/[a-z-]+\.md)[\w./-]*[\w/])"
)
_FENCE = re.compile(r"^```.*?^```", re.S | re.M)
_OUTSIDE = re.compile(r"\.\./shared|/work[/]")  # the folder beside the checkout; this machine's root


def _tracked(*patterns: str) -> list[Path]:
    out = subprocess.run(["git", "ls-files", "-z", *patterns], cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:  # not a git checkout (an sdist): walk the folders instead
        return sorted({p for pattern in patterns for p in ROOT.glob(pattern.replace(":(glob)", "")) if p.is_file()})
    return [ROOT / name for name in out.stdout.split("\0") if name]


def _documents() -> list[Path]:
    return _tracked(
        "README.md", "CONTRIBUTING.md", "docs/*.md", "rules/*.md", "bench/**.md", "fixtures/**.yaml", "fixtures/**.sh"
    )


def _repo_paths(text: str) -> list[str]:
    """Repository paths named in prose (a command in a code block may name the files it is about to write)."""
    found = []
    for match in _REPO_PATH.finditer(_FENCE.sub("", text)):
        after = text[match.end() : match.end() + 1]
        if after in ("<", "*", "{", "$") or "<" in match.group(1):
            continue  # a pattern (`rules/<CODE>.md`, `bench/tune/results/*.json`), not a path
        found.append(match.group(1).rstrip("."))
    return found


def test_links_and_paths_in_docs_resolve() -> None:
    missing = []
    for doc in _documents() + _tracked("docs/evidence/*.md"):
        text = doc.read_text(encoding="utf-8")
        for target in _LINK.findall(text):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            if not (doc.parent / target.split("#")[0]).exists():
                missing.append(f"{doc.relative_to(ROOT)}: link {target}")
        for path in [] if doc.parent.name == "evidence" else _repo_paths(text):  # notes cite upstream paths
            if not (ROOT / path).exists():
                missing.append(f"{doc.relative_to(ROOT)}: path {path}")
    assert not missing, "\n".join(missing)


def test_rule_evidence_paths_resolve() -> None:
    """What `cfgopt rule CODE` prints (the rule modules' docs) names only files a clone has."""
    named = [
        (rule.code, path) for rule in all_rules() for line in rule.docs()["evidence"] for path in _repo_paths(line)
    ]
    assert ("PF006", "bench/h200/measurements.md") in named  # the check sees the measurements the rules cite
    missing = [f"{code}: {path}" for code, path in named if not (ROOT / path).exists()]
    assert not missing, "\n".join(missing)


def test_nothing_points_outside_the_repository() -> None:
    """No doc, message, test or data file refers to the shared folder beside the checkout or to an absolute
    path of the machine it was written on."""
    offenders = []
    for path in _tracked():
        if path.suffix in (".whl", ".png", ".gz") or not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        offenders += [f"{path.relative_to(ROOT)}: {m.group(0)}" for m in _OUTSIDE.finditer(text)]
    assert not offenders, "\n".join(offenders)


# ------------------------------------------------------------------------------------------ the README's shape
_BULLET = re.compile(r"^(\s*)- ")


def long_bullets(text: str, limit: int = 3) -> list[str]:
    """The Markdown bullets of `text` (outside code blocks) that run over `limit` lines: a bullet is its `- ` line
    and the indented lines after it, up to a blank line or the next bullet."""
    found, start, lines = [], None, [*_FENCE.sub("", text).splitlines(), ""]
    for number, line in enumerate(lines):
        if start is not None and (not line.strip() or _BULLET.match(line) or not line.startswith(" ")):
            if number - start > limit:
                found.append(lines[start][:60])
            start = None
        if _BULLET.match(line):
            start = number
    return found


def test_no_readme_bullet_runs_over_three_lines() -> None:
    """The README is read, not searched: a point that needs more than three lines belongs in docs/."""
    assert long_bullets((ROOT / "README.md").read_text(encoding="utf-8")) == []
    assert long_bullets("- one\n  two\n  three\n  four\n- five\n") == ["- one"]


def test_the_readme_opens_with_the_job() -> None:
    """The first screen: what cfgopt is, the install, `cfgopt lint`, `cfgopt fix --write` and an example."""
    first_screen = "\n".join((ROOT / "README.md").read_text(encoding="utf-8").splitlines()[:50])
    for shown in ("pip install .", "cfgopt lint", "cfgopt fix configs/ --write", "## Example"):
        assert shown in first_screen, shown


# ----------------------------------------------------------------------------------- what is true now, not history
# Comments, messages and rule texts say what holds now; why it came to be is in git and in bench/. An upstream
# citation keeps its `#` (`LLaMA-Factory issue #6232`) and is not matched.
_ISSUE_POINTER = re.compile(r"\bissues? \d+", re.I)


def issue_pointers(text: str) -> list[str]:
    return [line.strip()[:80] for line in text.splitlines() if _ISSUE_POINTER.search(line)]


def test_no_issue_pointer_in_the_package() -> None:
    found = [
        f"{path.relative_to(ROOT)}: {line}"
        for path in _tracked("cfgopt")
        if path.suffix in (".py", ".json", ".toml", ".md", ".txt")
        for line in issue_pointers(path.read_text(encoding="utf-8"))
    ]
    found += [
        f"{rule.code}: {line}"
        for rule in all_rules()
        for value in rule.docs().values()
        if isinstance(value, (str, list))
        for line in issue_pointers(value if isinstance(value, str) else "\n".join(value))
    ]
    assert not found, "\n".join(found)


def test_the_issue_pointer_check_tells_a_pointer_from_a_citation() -> None:
    text = "# measured on the H200 (issue 41)\n'LLaMA-Factory issues #7979, #8793'\n# Issue 12 found it\n"
    assert issue_pointers(text) == ["# measured on the H200 (issue 41)", "# Issue 12 found it"]
