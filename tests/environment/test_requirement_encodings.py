"""A requirements file that is not UTF-8 states the job's environment as pip reads it (cfgopt/environment/pins.py,
cfgopt/environment/stated.py through cfgopt/text/requirements/pip_encoding.py): a latin-1 file with its coding
comment, a UTF-16 file with its byte order mark (Windows PowerShell 5's `pip freeze > requirements.txt`) is linted and
judges the LLaMA-Factory / DeepSpeed releases; one pip cannot decode is one error line and states no pins; no fix
writes a file that is not UTF-8 byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from job_configs import LORA_8B
from rule_cases import run_cli

from cfgopt.environment.pins import find_pins
from cfgopt.environment.stated import EnvironmentOptionError, found_environment, read_packages, stated_environment

PINS = "llamafactory==0.9.3\r\ndeepspeed==0.15.4\r\n"
LATIN1 = b"# -*- coding: latin-1 -*-\n# caf\xe9\n" + PINS.encode()
ENCODED = {"latin-1 with its coding comment": LATIN1, "UTF-16 with its byte order mark": PINS.encode("utf-16")}
NOT_DECODED = b"# caf\xe9\n" + PINS.encode()  # latin-1, no coding comment: pip on a UTF-8 node fails on it


def _repository(tmp_path: Path, requirements: bytes, name: str = "requirements.txt") -> Path:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "configs").mkdir()
    (repo / "configs" / "train.yaml").write_text(LORA_8B)
    (repo / name).write_bytes(requirements)
    return repo


def _judged(repo: Path) -> tuple[str, str, str]:
    """The config's LLaMA-Factory and DeepSpeed releases and the file its environment is read from (JSON report)."""
    _, report, _ = run_cli(["lint", "--format", "json", "--target", "h200", "--gpus", "1", str(repo)])
    config = next(f for f in json.loads(report)["files"] if f["file"].endswith("train.yaml"))
    return config["llamafactory_version"], config["deepspeed_version"], Path(config["environment"]).name


@pytest.mark.parametrize("encoded", ENCODED.values(), ids=ENCODED.keys())
def test_a_requirements_file_pip_decodes_is_linted_and_judges_the_release(tmp_path: Path, encoded: bytes) -> None:
    """It was `not UTF-8 text` (exit 2), and its pins garbage: the release judged fell back to the assumed one."""
    repo = _repository(tmp_path, encoded)
    code, _, err = run_cli(["lint", str(repo / "requirements.txt")])
    assert code in (0, 1) and "error:" not in err
    assert _judged(repo) == ("0.9.3", "0.15.4", "requirements.txt")
    _, settings, _ = run_cli(["lint", "--show-settings", str(repo / "configs" / "train.yaml")])
    assert 'llamafactory-version = "0.9.3"' in settings.splitlines()
    assert {p: r.spec for p, r in find_pins(repo / "configs").items()} == {
        "llamafactory": "==0.9.3",
        "deepspeed": "==0.15.4",
    }


def test_the_findings_of_a_utf16_file_are_where_they_are_in_its_utf8_twin(tmp_path: Path) -> None:
    """Lines and columns count the decoded text's characters: the same as in the file's UTF-8 twin."""
    text = "# caf\u00e9\r\nllamafactory==0.9.5\r\ntorch==2.5.1+cu121\r\n"
    found = []
    for encoding in ("utf-8", "utf-16"):
        repo = _repository(tmp_path / encoding, text.encode(encoding))
        _, report, _ = run_cli(["lint", "--format", "json", "--target", "mi300x", str(repo / "requirements.txt")])
        found.append([(d["code"], d["line"], d["column"], d["end_column"]) for d in json.loads(report)["diagnostics"]])
    assert found[0] == found[1] and ("ENV001", 3, 6, 19) in found[0]


def test_a_file_pip_cannot_decode_is_one_error_line_and_states_no_pins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """latin-1 without a coding comment: pip reads UTF-8 (a GPU node's locale) and stops with UnicodeDecodeError."""
    repo = _repository(tmp_path, NOT_DECODED)
    monkeypatch.chdir(repo)
    code, _, err = run_cli(["lint", "requirements.txt"])
    said = "requirements.txt: error: not UTF-8 text and no coding comment (byte 5: b'\\xe9')"
    assert code == 2 and said in err.splitlines() and "Traceback" not in err
    assert find_pins(repo / "configs") == {}
    assert read_packages(repo / "requirements.txt") is None and found_environment(repo / "configs") is None
    assert _judged(repo)[:2] == ("0.9.5", "0.19.8")  # the assumed releases, as with no requirements file


def test_environment_option_reads_a_file_as_pip_decodes_it(tmp_path: Path) -> None:
    """`--environment FILE` (any name but a lock, manifest, conda file or snapshot is a requirements file to pip)."""
    (tmp_path / "node.txt").write_bytes(LATIN1)
    (tmp_path / "freeze.txt").write_bytes(PINS.encode("utf-16"))
    (tmp_path / "broken.txt").write_bytes(NOT_DECODED)
    for name in ("node.txt", "freeze.txt"):
        env = stated_environment(name, "--environment", tmp_path)
        assert env is not None and env.packages == {"llamafactory": "==0.9.3", "deepspeed": "==0.15.4"}
    with pytest.raises(EnvironmentOptionError, match=r"broken\.txt cannot be read .*\(not UTF-8 text and no coding"):
        stated_environment("broken.txt", "--environment", tmp_path)


@pytest.mark.parametrize("including", ["requirements.txt", "environment.yml"])
def test_an_included_file_is_decoded_as_pip_decodes_it(tmp_path: Path, including: str) -> None:
    """`-r base.txt` in a requirements file or in a conda environment's `- pip:` list: pip reads base.txt with the
    same decoding; one it cannot decode includes nothing."""
    text = "-r base.txt\n" if including == "requirements.txt" else "dependencies:\n  - pip:\n    - -r base.txt\n"
    repo = _repository(tmp_path, text.encode(), including)
    (repo / "base.txt").write_bytes(PINS.encode("utf-16"))
    assert read_packages(repo / including) == {"llamafactory": "==0.9.3", "deepspeed": "==0.15.4"}
    assert find_pins(repo / "configs")["llamafactory"].spec == "==0.9.3"
    (repo / "base.txt").write_bytes(NOT_DECODED)
    assert read_packages(repo / including) == {} and find_pins(repo / "configs") == {}


def test_no_fix_writes_a_requirements_file_that_is_not_utf8(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ENV004 would add liger-kernel's pin: the fixer writes UTF-8, so a UTF-16 or latin-1 file is left byte for
    byte, with why; an ASCII file under a latin-1 coding comment is its text's UTF-8, and gets the pin."""
    plain = PINS.replace("0.9.3", "0.9.5").replace("deepspeed==0.15.4\r\n", "")
    cases = {"utf-16": plain.encode("utf-16"), "latin-1": b"# coding: latin-1\r\n# caf\xe9\r\n" + plain.encode()}
    for name, raw in cases.items():
        repo = _repository(tmp_path / name, raw)
        monkeypatch.chdir(repo)
        _, out, _ = run_cli(["lint", ".", "--target", "h200", "--gpus", "1"])
        assert "ENV004" in out
        _, _, err = run_cli(["fix", ".", "--write", "--unsafe-fixes", "--target", "h200", "--gpus", "1"])
        assert (repo / "requirements.txt").read_bytes() == raw
        assert "requirements.txt: not fixed: pip reads it as " in err and "not UTF-8" in err
    ascii_latin = b"# coding: latin-1\r\n" + plain.encode()
    repo = _repository(tmp_path / "ascii", ascii_latin)
    monkeypatch.chdir(repo)
    run_cli(["fix", ".", "--write", "--unsafe-fixes", "--target", "h200", "--gpus", "1"])
    assert (repo / "requirements.txt").read_bytes().startswith(ascii_latin) and b"liger" in (
        repo / "requirements.txt"
    ).read_bytes()
