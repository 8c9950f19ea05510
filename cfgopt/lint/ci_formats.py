"""Machine formats for CI: `json-lines`, `github` (Actions workflow commands), `sarif` (SARIF 2.1.0 as GitHub
code scanning ingests it) and `junit` (JUnit XML for CI test tabs). Imported only when one of them is asked for.

References: docs/evidence/linter_anchors.md §4.3 (SARIF), §4.4 (annotations); tests/lint/test_formats.py
validates the SARIF output against the official schema (tests/data/sarif-2.1.0.json).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.document import display_path, shown

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TextIO


def render(fmt: str, result, stream: TextIO, fail_on: Severity | None = None) -> None:
    """`result`: engine.LintResult; `fail_on`: `--fail-on` (None: each file's own), which JUnit fails at."""
    from cfgopt.job.job import files_judged

    judged = files_judged(result)
    if fmt == "json-lines":
        render_json_lines(result.diagnostics, stream, judged)
    elif fmt == "github":
        render_github(result.diagnostics, result.problems, stream)
    elif fmt == "sarif":
        render_sarif(result.diagnostics, result.problems, stream, judged)
    else:
        failing = {path: fail_on or s.fail_on for path, s in result.file_settings.items()}
        render_junit(result.diagnostics, result.problems, result.checked, stream, judged, failing)


def render_json_lines(diags: list[Diagnostic], stream: TextIO, judged: dict | None = None) -> None:
    """One JSON object per line, the same objects as `--format json`'s `diagnostics`, each with `judged`: what
    its file was judged for (`report.judged_settings`), so that every line stands alone."""
    for d in diags:
        line = d.to_json()
        if judged is not None and line["file"] in judged:
            line["judged"] = judged[line["file"]]
        stream.write(json.dumps(line) + "\n")


# --------------------------------------------------------------------------- GitHub Actions


_GITHUB_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def _gh_data(text: str) -> str:
    """actions/toolkit `escapeData`."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _gh_property(text: str) -> str:
    """actions/toolkit `escapeProperty`: also `:` and `,`, which end a property."""
    return _gh_data(text).replace(":", "%3A").replace(",", "%2C")


def render_github(diags: list[Diagnostic], problems: list, stream: TextIO) -> None:
    """GitHub Actions workflow commands:
    `::error file=...,line=...,col=...,endLine=...,endColumn=...,title=CODE name::message`. People read them in
    the log and the diff view, so what comes from a file (a key, a path) is `shown` first, as in the terminal
    formats: no escape sequence or lone surrogate reaches the log."""
    for d in diags:
        line, col = d.line_column
        end_line, end_col = d.end_line_column
        props = [f"file={_gh_property(shown(display_path(d.path)))}", f"line={line}"]
        if end_line == line:  # GitHub uses the columns only on a one-line span
            props += [f"col={col}", f"endLine={end_line}", f"endColumn={max(end_col, col)}"]
        else:
            props += [f"endLine={end_line}"]
        props.append(f"title={_gh_property(f'{d.code} {d.name}')}")
        message = shown(f"{display_path(d.path)}:{line}:{col}: {d.code} {d.message}")
        stream.write(f"::{_GITHUB_LEVEL[d.severity]} {','.join(props)}::{_gh_data(message)}\n")
    for p in problems:
        shown_path = shown(display_path(p.path))
        stream.write(
            f"::error file={_gh_property(shown_path)},title=cfgopt::{_gh_data(f'{shown_path}: {shown(p.message)}')}\n"
        )


# --------------------------------------------------------------------------- SARIF


SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
_SARIF_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


def _artifact_location(path: Path) -> dict:
    """A URI relative to the working directory (`%SRCROOT%`), or an absolute file URI outside it."""
    from urllib.parse import quote

    shown = Path(display_path(path))
    if shown.is_absolute():
        return {"uri": shown.as_uri()}
    # the file name's own bytes, percent-encoded: a name that is not UTF-8 reaches Python as lone surrogates
    return {"uri": quote(os.fsencode(shown.as_posix())), "uriBaseId": "%SRCROOT%"}


def _region(doc, start: int, end: int) -> dict:
    line, col = doc.position(start)
    end_line, end_col = doc.position(max(start, end))
    return {"startLine": line, "startColumn": col, "endLine": end_line, "endColumn": max(end_col, 1)}


def _rule_descriptor(rule) -> dict:
    doc = rule.docs()
    help_text = "\n\n".join(
        part
        for part in (
            doc["summary"],
            f"Why: {doc['why']}" if doc["why"] else "",
            f"When the real tool fails: {doc['fails_when']}" if doc["fails_when"] else "",
            f"Example:\n{doc['example']}" if doc["example"] else "",
            f"Fix: {doc['fix_safety']}" if doc["fix_safety"] else "",
            f"More: `cfgopt rule {doc['code']}` or rules/{doc['code']}.md",
        )
        if part
    )
    return {
        "id": doc["code"],
        "name": doc["name"],
        "shortDescription": {"text": doc["summary"]},
        "fullDescription": {"text": doc["why"] or doc["summary"]},
        "help": {"text": help_text},
        "defaultConfiguration": {"level": _SARIF_LEVEL[rule.severity]},
        "properties": {"tags": [doc["code"].rstrip("0123456789")], "kinds": doc["kinds"]},
    }


def _fingerprint(d: Diagnostic, uri: str) -> str:
    import hashlib

    # stable across runs and line moves: rule, file, key path (or the line's text) and message
    anchor = d.key or d.document.line_text(d.line_column[0]).strip()
    text = f"{d.code}\0{uri}\0{anchor}\0{d.message}"
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]  # a JSON key may be "\ud800"


def sarif_log(diags: list[Diagnostic], problems: list, judged: dict | None = None) -> dict:
    """`judged`: each file's settings (`report.files_judged`), carried as the properties of its artifact."""
    from cfgopt.rules import by_code
    from cfgopt.version import __version__

    used = sorted({d.code for d in diags})
    rules = [r for r in (by_code(code) for code in used) if r is not None]
    index = {r.code: i for i, r in enumerate(rules)}
    results = []
    for d in diags:
        location = _artifact_location(d.path)
        result: dict = {
            "ruleId": d.code,
            "level": _SARIF_LEVEL[d.severity],
            "message": {"text": d.message},
            "locations": [
                {"physicalLocation": {"artifactLocation": location, "region": _region(d.document, d.start, d.end)}}
            ],
            "partialFingerprints": {"cfgoptFinding/v1": _fingerprint(d, location["uri"])},
        }
        if d.code in index:
            result["ruleIndex"] = index[d.code]
        properties = {"key": d.key} if d.key else {}
        if d.detail:
            properties["detail"] = d.detail
        if properties:
            result["properties"] = properties
        if d.fix is not None:
            result["fixes"] = [
                {
                    "description": {"text": f"{d.fix.description} ({d.fix.applicability})"},
                    "artifactChanges": [
                        {
                            "artifactLocation": location,
                            "replacements": [
                                {
                                    "deletedRegion": _region(d.document, e.start, e.end),
                                    "insertedContent": {"text": e.text},
                                }
                                for e in d.fix.edits
                            ],
                        }
                    ],
                }
            ]
        results.append(result)
    notifications = [
        {
            "level": "error",
            "message": {"text": p.message},
            "locations": [{"physicalLocation": {"artifactLocation": _artifact_location(Path(p.path))}}],
        }
        for p in problems
    ]
    run: dict = {
        "tool": {
            "driver": {
                "name": "cfgopt",
                "version": __version__,
                "semanticVersion": __version__,
                "rules": [_rule_descriptor(r) for r in rules],
            }
        },
        "originalUriBaseIds": {"%SRCROOT%": {"uri": Path.cwd().as_uri() + "/"}},
        "columnKind": "unicodeCodePoints",
        "invocations": [{"executionSuccessful": not problems, "toolExecutionNotifications": notifications}],
        "results": results,
    }
    if judged:
        run["artifacts"] = [
            {"location": _artifact_location(Path(name)), "properties": {"judged": settings}}
            for name, settings in judged.items()
        ]
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}


def render_sarif(diags: list[Diagnostic], problems: list, stream: TextIO, judged: dict | None = None) -> None:
    json.dump(sarif_log(diags, problems, judged), stream, indent=2)
    stream.write("\n")


# --------------------------------------------------------------------------- JUnit


def render_junit(
    diags: list[Diagnostic],
    problems: list,
    checked: list[Path],
    stream: TextIO,
    judged: dict | None = None,
    failing: dict[Path, Severity] | None = None,
) -> None:
    """JUnit XML: one <testsuite> per file (its settings as <properties>), one <testcase> in it, one <failure>
    per finding at or above the file's `--fail-on` (`failing`, by resolved path; default warning), the findings
    below it in <system-out> (a CI test tab then fails exactly when the exit code does), an <error> for a file
    that could not be read. Clean files are passing test cases, so CI test tabs count them. The elements and
    attributes are those of the JUnit schema Jenkins validates (tests/data/junit.xsd)."""
    import xml.etree.ElementTree as ET

    from cfgopt.text.document import real_path

    by_file: dict[str, list[Diagnostic]] = {}
    for path in checked:
        by_file.setdefault(display_path(path), [])
    for d in diags:
        by_file.setdefault(display_path(d.path), []).append(d)
    broken = {display_path(Path(p.path)): p.message for p in problems}
    for name in broken:
        by_file.setdefault(name, [])
    failing = failing or {}

    def fails(d: Diagnostic) -> bool:
        return d.severity >= failing.get(real_path(d.path), Severity.WARNING)

    root = ET.Element(
        "testsuites",
        name="cfgopt",
        tests=str(len(by_file)),
        failures=str(sum(1 for v in by_file.values() if any(fails(d) for d in v))),
        errors=str(len(broken)),
    )
    for name in sorted(by_file):
        found = by_file[name]
        failed = [d for d in found if fails(d)]
        suite = ET.SubElement(
            root,
            "testsuite",
            name=name,
            tests="1",
            failures="1" if failed else "0",
            errors="1" if name in broken else "0",
            skipped="0",
            file=name,
        )
        if judged and name in judged:
            properties = ET.SubElement(suite, "properties")
            for key, value in judged[name].items():
                ET.SubElement(properties, "property", name=key, value="" if value is None else str(value))
        case = ET.SubElement(suite, "testcase", name=name, classname="cfgopt")
        for d in failed:
            failure = ET.SubElement(case, "failure", message=f"{d.code} {d.message}", type=f"{d.severity}")
            failure.text = _junit_line(name, d)
        below = [d for d in found if not fails(d)]
        if below:  # reported, not failed: the exit code does not count them either
            ET.SubElement(case, "system-out").text = "\n".join(_junit_line(name, d) for d in below)
        if name in broken:
            error = ET.SubElement(case, "error", message=broken[name], type="cfgopt")
            error.text = broken[name]
    _xml_safe(root)
    ET.indent(root) if hasattr(ET, "indent") else None
    stream.write('<?xml version="1.0" encoding="UTF-8"?>\n')
    # ASCII with character references: the same valid XML whatever the stream's encoding (a latin-1 pipe too)
    stream.write(ET.tostring(root, encoding="unicode").encode("ascii", "xmlcharrefreplace").decode("ascii"))
    stream.write("\n")


def _junit_line(name: str, d: Diagnostic) -> str:
    line, col = d.line_column
    return f"{name}:{line}:{col}: {d.severity} {d.code} [{d.name}] {d.message}"


def _xml_safe(root) -> None:
    """XML 1.0 has no escape for most control characters nor for lone surrogates (ElementTree writes them as they
    are, which no XML parser reads back): every text and attribute is `shown` (`\\xNN`, `\\uNNNN`), which also
    suits the people reading a CI test tab."""
    for element in root.iter():
        element.attrib.update({key: shown(value) for key, value in element.attrib.items()})
        if element.text:  # line breaks kept: <system-out> holds one finding per line
            element.text = "\n".join(shown(line) for line in element.text.split("\n"))
