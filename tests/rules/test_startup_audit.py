"""The start-up audit's table (tests/data/startup-audit.json, written by scripts/audit_startup_checks.py): every
`raise`/`assert` that stops a run in the supported releases maps to a rule or to a reason it cannot be checked
statically, and the installed releases hold no check the table lacks."""

from __future__ import annotations

import json
import sys

import pytest
from repo_paths import ROOT

TABLE = json.loads((ROOT / "tests" / "data" / "startup-audit.json").read_text(encoding="utf-8"))
# What a reason's category means: docs/startup-audit.md.
CATEGORIES = {"data", "model", "runtime", "export", "internal", "legacy", "todo"}
SUPPORTED = {
    "llamafactory": {"0.9.0", "0.9.1", "0.9.2", "0.9.3", "0.9.4", "0.9.5"},
    "deepspeed": {"0.14.5", "0.15.4", "0.16.4", "0.17.6", "0.18.9", "0.19.8"},
}


def _codes() -> set[str]:
    """The rule codes, from the rule modules' names (`<code>_<name>.py`)."""
    return {path.name.split("_")[0].upper() for path in (ROOT / "cfgopt" / "rules").glob("[a-z]*[0-9]_*.py")}


def test_every_check_is_mapped_to_a_rule_or_a_reason():
    codes = _codes()
    problems = []
    for entry in TABLE:
        where = f"{entry['package']} {entry['file']}: {entry['message']}"
        if entry["rule"]:  # one code, or several separated by spaces
            if not set(entry["rule"].split()) <= codes:
                problems.append(f"{where}: no rule {entry['rule']}")
        elif entry["reason"].split(":")[0] not in CATEGORIES:
            problems.append(f"{where}: unmapped (rule or reason `<category>: ...` needed)")
    assert not problems, "\n".join(problems)


def test_every_supported_release_was_audited():
    for package, versions in SUPPORTED.items():
        seen = {version for entry in TABLE if entry["package"] == package for version in entry["releases"]}
        assert versions <= seen, f"{package}: releases never audited: {sorted(versions - seen)}"


def test_table_keys_are_unique_and_relative():
    keys = [(entry["package"], entry["file"], entry["message"]) for entry in TABLE]
    assert len(keys) == len(set(keys))
    assert all(not entry["file"].startswith("/") and ".." not in entry["file"] for entry in TABLE)


def _audit_script():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import audit_startup_checks as audit
    finally:
        sys.path.pop(0)
    return audit


def test_the_audit_page_is_current():
    page = (ROOT / "docs" / "startup-audit.md").read_text(encoding="utf-8")
    assert page == _audit_script().render_doc(TABLE), "run python scripts/audit_startup_checks.py"


@pytest.mark.parametrize("package", sorted(SUPPORTED))
def test_installed_release_has_no_check_missing_from_the_table(package):
    audit = _audit_script()
    found = audit.installed(package)
    if found is None:
        pytest.skip(f"{package} is not installed")
    version, location = found
    known = {(entry["file"], entry["message"]) for entry in TABLE if entry["package"] == package}
    missing = [
        f"{check.file} ({check.function}): {check.message}"
        for check in audit.scan(package, location)
        if check.key not in known
    ]
    assert not missing, f"{package} {version}: run scripts/audit_startup_checks.py and map:\n" + "\n".join(missing)


def test_the_script_reads_wheels_and_sdists(tmp_path):
    """Older releases are audited from their wheel (LLaMA-Factory) or sdist (DeepSpeed) without installing them."""
    import tarfile
    import zipfile

    audit = _audit_script()
    source = 'def check(args):\n    if args.x and not args.y:\n        raise ValueError(f"`x` needs {args.y}.")\n'
    wheel = tmp_path / "llamafactory-9.9.9-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("llamafactory/hparams/parser.py", source)
        archive.writestr("llamafactory/webui/runner.py", source)  # not reached at start-up: not scanned
    sdist = tmp_path / "deepspeed-9.9.9.tar.gz"
    module = tmp_path / "config.py"
    module.write_text("def f(d):\n    assert d['a'] > 0, 'a must be positive'\n", encoding="utf-8")
    with tarfile.open(sdist, "w:gz") as archive:
        archive.add(module, arcname="deepspeed-9.9.9/deepspeed/runtime/config.py")
    [check] = audit.scan("llamafactory", str(wheel))
    assert (check.file, check.function, check.message) == ("hparams/parser.py", "check", "`x` needs {}.")
    assert check.condition == "args.x and (not args.y)"
    [check] = audit.scan("deepspeed", str(sdist))
    assert (check.file, check.kind, check.message) == ("runtime/config.py", "assert", "a must be positive")
