"""Output formats for CI and tools: json-lines, github, sarif (validated against the SARIF 2.1.0 schema), junit;
--show-fixes, --statistics, --exit-zero."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from repo_paths import TESTS_DATA
from rule_cases import ROOT, run_cli

SEED = ROOT / "fixtures" / "seed"
SARIF_SCHEMA = TESTS_DATA / "sarif-2.1.0.json"


@pytest.fixture(autouse=True)
def _in_repo_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # paths in reports are relative to the working directory


def lint(*args: str) -> tuple[int, str, str]:
    return run_cli(["lint", *args])


def test_json_lines_are_the_json_objects() -> None:
    code, out, _ = lint("--format", "json-lines", "fixtures/seed")
    _, full, _ = lint("--format", "json", "fixtures/seed")
    assert code == 1
    lines = [json.loads(line) for line in out.splitlines()]
    judged = {f.pop("file"): f for f in json.loads(full)["files"]}
    assert all(line.pop("judged") == judged[line["file"]] for line in lines)  # each line stands alone
    assert lines == json.loads(full)["diagnostics"]


def test_machine_formats_say_what_each_file_was_judged_for_with_relative_paths() -> None:
    """A DeepSpeed JSON reached through a config is relative too; each file carries its own target, GPU
    count, releases and environment (fixtures/clean has its own cfgopt.toml: mi300x)."""
    _, out, _ = lint("--format", "json", "fixtures/seed/llama3_lora_sft.yaml", "fixtures/clean")
    data = json.loads(out)
    assert {d["file"] for d in data["diagnostics"]} >= {"fixtures/seed/ds_z3_config.json"}
    assert not any(Path(d["file"]).is_absolute() for d in data["diagnostics"])
    files = {f["file"]: f for f in data["files"]}
    assert files["fixtures/clean/llama3_lora_sft.yaml"]["target"] == "mi300x"
    assert files["fixtures/seed/llama3_lora_sft.yaml"]["target"] is None
    assert files["fixtures/seed/ds_z3_config.json"]["llamafactory_version"]
    assert files["fixtures/seed/ds_z3_config.json"]["environment"].startswith("assumed")
    _, sarif, _ = lint("--format", "sarif", "fixtures/seed/llama3_lora_sft.yaml", "fixtures/clean")
    artifacts = json.loads(sarif)["runs"][0]["artifacts"]
    judged = {a["location"]["uri"]: a["properties"]["judged"] for a in artifacts}
    assert judged["fixtures/clean/llama3_lora_sft.yaml"]["target"] == "mi300x"


def test_github_annotations() -> None:
    # every rule, so that the advice (info, opt-in) shows as notices too
    code, out, _ = lint("--format", "github", "--select", "ALL", "fixtures/seed/llama3_lora_sft.yaml")
    assert code == 1
    line = next(x for x in out.splitlines() if "LF003" in x)
    assert line.startswith("::error file=fixtures/seed/llama3_lora_sft.yaml,line=15,col=13,endLine=15,endColumn=17,")
    assert ",title=LF003 invalid-choice::fixtures/seed/llama3_lora_sft.yaml:15:13: LF003 " in line
    assert any(x.startswith("::warning ") for x in out.splitlines())
    assert any(x.startswith("::notice ") for x in out.splitlines())
    assert all(x.startswith("::") for x in out.splitlines())


def test_github_escaping() -> None:
    from cfgopt.lint.ci_formats import _gh_data, _gh_property

    assert _gh_data("50% a\r\nb") == "50%25 a%0D%0Ab"
    assert _gh_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"


def sarif_validator():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SARIF_SCHEMA.read_text())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def test_sarif_is_valid_sarif_2_1_0() -> None:
    code, out, _ = lint("--format", "sarif", "fixtures/seed", "fixtures/clean")
    assert code == 1
    log = json.loads(out)
    errors = sorted(sarif_validator().iter_errors(log), key=lambda e: list(e.path))
    assert not errors, [f"{list(e.path)}: {e.message}" for e in errors[:5]]


def test_sarif_has_what_github_code_scanning_needs() -> None:
    _, out, _ = lint("--format", "sarif", "--select", "ALL", "fixtures/seed")
    log = json.loads(out)
    assert log["version"] == "2.1.0" and log["$schema"].endswith("sarif-schema-2.1.0.json")
    run = log["runs"][0]
    driver = run["tool"]["driver"]
    assert driver["name"] == "cfgopt"
    rules = {r["id"]: r for r in driver["rules"]}
    lf003 = rules["LF003"]
    assert lf003["name"] == "invalid-choice"
    assert lf003["shortDescription"]["text"] and lf003["fullDescription"]["text"] and lf003["help"]["text"]
    assert lf003["defaultConfiguration"]["level"] == "error"
    assert all(r["ruleId"] in rules for r in run["results"])
    result = next(r for r in run["results"] if r["ruleId"] == "LF003" and "yaml" in json.dumps(r["locations"]))
    assert result["level"] == "error" and result["message"]["text"]
    assert driver["rules"][result["ruleIndex"]]["id"] == "LF003"
    location = result["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": "fixtures/seed/llama3_lora_sft.yaml", "uriBaseId": "%SRCROOT%"}
    assert location["region"] == {"startLine": 15, "startColumn": 13, "endLine": 15, "endColumn": 17}
    assert result["partialFingerprints"]
    levels = {r["level"] for r in run["results"]}
    assert levels == {"error", "warning", "note"}
    # a fix is described with its replacements
    fixed = next(r for r in run["results"] if "fixes" in r)
    assert fixed["fixes"][0]["artifactChanges"][0]["replacements"]


def test_sarif_fingerprints_are_stable_across_line_moves(tmp_path: Path) -> None:
    text = (SEED / "llama3_lora_sft.yaml").read_text()
    (tmp_path / "ds_z3_config.json").write_text((SEED / "ds_z3_config.json").read_text())
    (tmp_path / "a.yaml").write_text(text)
    _, before, _ = lint("--format", "sarif", str(tmp_path / "a.yaml"))
    (tmp_path / "a.yaml").write_text("# a new first line\n" + text)
    _, after, _ = lint("--format", "sarif", str(tmp_path / "a.yaml"))

    def prints(out: str) -> set[str]:
        return {r["partialFingerprints"]["cfgoptFinding/v1"] for r in json.loads(out)["runs"][0]["results"]}

    assert prints(before) == prints(after)


def test_sarif_with_no_findings_and_with_unreadable_files(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_bytes(b"\xff\xfe")
    code, out, _ = lint("--format", "sarif", str(tmp_path / "bad.yaml"))
    assert code == 2
    log = json.loads(out)
    assert not list(sarif_validator().iter_errors(log))
    assert log["runs"][0]["results"] == []
    assert log["runs"][0]["invocations"][0]["toolExecutionNotifications"]


def test_junit_xml() -> None:
    code, out, _ = lint("--format", "junit", "fixtures/seed", "fixtures/clean")
    assert code == 1
    root = ET.fromstring(out)
    assert root.tag == "testsuites"
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert set(suites) >= {
        "fixtures/seed/llama3_lora_sft.yaml",
        "fixtures/seed/ds_z3_config.json",
        "fixtures/seed/train.sh",
        "fixtures/clean/llama3_lora_sft.yaml",
    }
    seed = suites["fixtures/seed/llama3_lora_sft.yaml"]
    (case,) = seed.findall("testcase")
    failures = case.findall("failure")
    _, full, _ = lint("--format", "json", "fixtures/seed/llama3_lora_sft.yaml")
    yaml_diags = [d for d in json.loads(full)["diagnostics"] if d["file"].endswith("llama3_lora_sft.yaml")]
    failing = [d for d in yaml_diags if d["severity"] in ("error", "warning")]  # --fail-on's default: warning
    assert len(failures) == len(failing) < len(yaml_diags)
    assert any(f.get("type") == "error" and f.get("message", "").startswith("LF003 ") for f in failures)
    assert all(f.get("type") != "info" for f in failures)
    assert "info PF006" in case.find("system-out").text  # reported, not failed
    assert int(root.get("tests")) == len(suites)


JUNIT_SCHEMA = TESTS_DATA / "junit.xsd"


@pytest.mark.parametrize("fail_on", ["error", "warning", "info"])
def test_junit_is_valid_and_fails_as_the_exit_code_does(fail_on: str) -> None:
    """Validated against the JUnit schema CI tools read (tests/data/junit.xsd); a finding is a <failure> exactly
    when it is at or above --fail-on, so the test tab fails when, and only when, the exit code does."""
    xmlschema = pytest.importorskip("xmlschema")
    code, out, _ = lint("--format", "junit", "--fail-on", fail_on, "--select", "ALL", "fixtures/seed", "fixtures/clean")
    xmlschema.XMLSchema(JUNIT_SCHEMA).validate(out)
    root = ET.fromstring(out)
    types = {f.get("type") for f in root.iter("failure")}
    ranks = {"error": 0, "warning": 1, "info": 2}
    assert types and all(ranks[t] <= ranks[fail_on] for t in types)
    assert (int(root.get("failures")) > 0) == (code == 1)
    clean = next(s for s in root.iter("testsuite") if s.get("name") == "fixtures/clean/llama3_lora_sft.yaml")
    judged = {p.get("name"): p.get("value") for p in clean.iter("property")}
    assert judged["target"] == "mi300x" and judged["hardware_source"] == "cfgopt.toml"


def test_show_fixes_lists_available_fixes() -> None:
    _code, out, _ = lint("--format", "concise", "--show-fixes", "fixtures/seed/llama3_lora_sft.yaml")
    assert "fix(es) available" in out
    assert "LF003 [unsafe]" in out and "LF001 [" in out


def test_show_fixes_on_fix(tmp_path: Path) -> None:
    import shutil

    work = tmp_path / "seed"
    shutil.copytree(SEED, work)
    _code, _, err = run_cli(["fix", "--write", "--show-fixes", str(work)])
    assert "Fixed " in err and "LF001" in err


def test_statistics_print_only_the_table_one_row_per_rule() -> None:
    """As ruff: the table instead of the findings (no summary line); `[*]` only for rules with safe fixes."""
    code, out, err = lint("--statistics", "fixtures/seed")
    rows = [line.split("\t") for line in out.splitlines()]
    codes = [row[1] for row in rows]
    assert code == 1 and len(codes) == len(set(codes)) and "LF003" in codes
    assert all(len(row) == 3 for row in rows) and "Checked" not in err
    marks = {row[1]: row[2].startswith("[*]") for row in rows}
    assert marks["LF001"] and not marks["LF003"]  # LF003's fix is unsafe: no mark
    code, out, _ = lint("--format", "json", "--statistics", "fixtures/seed")
    stats = json.loads(out)
    assert code == 1 and {"code", "name", "count", "fixable"} == set(stats[0])
    assert sum(r["count"] for r in stats) == len(
        json.loads(lint("--format", "json", "fixtures/seed")[1])["diagnostics"]
    )


def test_fix_statistics_print_only_the_table_of_what_the_fixes_leave(tmp_path: Path) -> None:
    """The same option on fix (README: "means the same on every subcommand"): the table instead of the diff, the
    fix lines and the summary, one row per rule left after the fixes (with --write too); json as before."""
    import shutil

    work = tmp_path / "seed"
    shutil.copytree(SEED, work)
    before = {p.name: p.read_text() for p in work.iterdir()}
    code, out, err = run_cli(["fix", "--statistics", str(work)])
    rows = [line.split("\t") for line in out.splitlines()]
    assert code == 1 and rows and all(len(row) == 3 for row in rows), out
    assert "---" not in out and "would fix" not in err and "Would fix" not in err
    assert {p.name: p.read_text() for p in work.iterdir()} == before  # without --write: nothing written
    _, as_json, _ = run_cli(["fix", "--statistics", "--format", "json", str(work)])
    assert [(int(n), c) for n, c, _ in rows] == [(r["count"], r["code"]) for r in json.loads(as_json)]
    assert rows != [line.split("\t") for line in lint("--statistics", str(work))[1].splitlines()]  # fixes counted
    code, out, err = run_cli(["fix", "--statistics", "--write", str(work)])
    assert code == 1 and [line.split("\t") for line in out.splitlines()] == rows
    assert "fixed:" not in err and "Fixed" not in err
    assert {p.name: p.read_text() for p in work.iterdir()} != before
    assert out == lint("--statistics", str(work))[1]  # what lint now finds in the written files


def test_exit_zero() -> None:
    code, _, _ = lint("--format", "concise", "--exit-zero", "fixtures/seed/llama3_lora_sft.yaml")
    assert code == 0


def test_output_format_alias() -> None:
    _code, out, _ = lint("--output-format", "json-lines", "fixtures/seed/train.sh")
    assert all(json.loads(line) for line in out.splitlines())
