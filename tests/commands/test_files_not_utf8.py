"""Files that are not UTF-8 in a walk and under the pre-commit hooks (cfgopt/project/project.py `_is_ours_unread`):
an unrelated one (a UTF-16 CI workflow, a Latin-1 translation file, a binary blob named .yaml) passes silently as
any other YAML/JSON does (README, docs/configuration.md); a LLaMA-Factory or DeepSpeed config keeps its encoding
error (OmegaConf.load and json.load read UTF-8 and stop), and so does any file named without --recognised-only
(docs/limits.md: "named explicitly on the command line, it is reported")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from rule_cases import ROOT, run_cli

SEED = ROOT / "fixtures" / "seed"
CONFIG = (SEED / "llama3_lora_sft.yaml").read_text().replace("deepspeed: ds_z3_config.json\n", "")

UNRELATED = {
    "ci.yaml": "name: ci\non: push\n".encode("utf-16"),  # with a byte order mark
    "ci-no-bom.yml": "name: ci\non: push\njobs: {}\n".encode("utf-16-le"),
    "i18n.yaml": "greeting: caf\u00e9\nlang: fr\n".encode("latin-1"),
    "package.json": '{"name": "caf\u00e9", "version": "1.0.0"}'.encode("utf-16"),
    "blob.yaml": b"\x7fELF\x02\x01\x01\x00\x00\x00" * 10,
}
OURS = {
    "train16.yaml": CONFIG.encode("utf-16"),
    "train1.yaml": (CONFIG + "# caf\u00e9\n").encode("latin-1"),
    # recognised as a readable file is: three LLaMA-Factory keys and no `model_name_or_path`
    "export1.yaml": "template: llama3\nfinetuning_type: lora\ncutoff_len: 1024\n# r\u00e9sum\u00e9\n".encode("latin-1"),
    "ds16.json": json.dumps({"zero_optimization": {"stage": 2}}).encode("utf-16"),
}
HOOKS = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
PRE_COMMIT = {hook["id"]: hook["entry"].split()[1:] for hook in HOOKS}  # the shipped entries, `cfgopt` left out


def write(folder: Path, files: dict[str, bytes]) -> list[str]:
    for name, raw in files.items():
        (folder / name).write_bytes(raw)
    return sorted(str(folder / name) for name in files)


def problems(out: str) -> set[str]:
    return {Path(p["file"]).name for p in json.loads(out)["problems"]}


def test_unrelated_files_not_utf8_pass_a_walk_silently(tmp_path: Path) -> None:
    write(tmp_path, UNRELATED)
    code, out, err = run_cli(["lint", "--format", "json", str(tmp_path)])
    assert (code, problems(out)) == (0, set()), err


@pytest.mark.parametrize("hook", ["cfgopt-lint", "cfgopt-fix"])
def test_unrelated_files_not_utf8_pass_the_hooks_silently(tmp_path: Path, hook: str) -> None:
    names = write(tmp_path, UNRELATED)
    code, _, err = run_cli([*PRE_COMMIT[hook], *names])
    assert code == 0 and ": error: " not in err, err
    assert all((tmp_path / name).read_bytes() == raw for name, raw in UNRELATED.items())


def test_configs_not_utf8_keep_their_encoding_error_in_a_walk(tmp_path: Path) -> None:
    write(tmp_path, {**UNRELATED, **OURS})
    code, out, _ = run_cli(["lint", "--format", "json", str(tmp_path)])
    assert (code, problems(out)) == (2, set(OURS))
    message = {Path(p["file"]).name: p["message"] for p in json.loads(out)["problems"]}
    assert message["train16.yaml"].startswith("UTF-16 encoded (little-endian, with a byte order mark): LLaMA-Factory")
    assert message["train1.yaml"].startswith("not UTF-8 text (byte ")


@pytest.mark.parametrize("hook", ["cfgopt-lint", "cfgopt-fix"])
def test_configs_not_utf8_keep_their_encoding_error_under_the_hooks(tmp_path: Path, hook: str) -> None:
    names = write(tmp_path, {**UNRELATED, **OURS})
    code, _, err = run_cli([*PRE_COMMIT[hook], *names])
    assert code == 2
    reported = {line.split(":", 1)[0] for line in err.splitlines() if ": error: " in line}
    assert {Path(name).name for name in reported} == set(OURS)


def test_a_file_named_without_recognised_only_is_reported(tmp_path: Path) -> None:
    names = write(tmp_path, UNRELATED)
    code, out, _ = run_cli(["lint", "--format", "json", *names])
    assert (code, problems(out)) == (2, set(UNRELATED))


# ---------------------------------------------------------------- stdin (cfgopt/commands/common.py `read_stdin`)


def run_stdin(argv: list[str], raw: bytes, monkeypatch: pytest.MonkeyPatch) -> tuple[int, bytes, str]:
    """`cfgopt ARGV` with `raw` on stdin: (exit code, stdout's bytes, what a pipeline gets, and stderr)."""
    import contextlib
    import io
    import sys

    from cfgopt.cli import main

    out, err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True), io.StringIO()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8"))
    monkeypatch.setattr(sys, "stdout", out)
    with contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.buffer.getvalue(), err.getvalue()


STDIN_NOT_UTF8 = [
    ("latin1", (CONFIG + "# caf\u00e9\n").encode("latin-1"), "cfg.yaml: error: not UTF-8 text (byte "),
    ("utf16", CONFIG.encode("utf-16"), "cfg.yaml: error: UTF-16 encoded (little-endian, with a byte order mark): "),
    ("binary", b"\x7fELF\x02\x01\x01\x00\x00\x00" * 10, "cfg.yaml: error: binary file (contains NUL bytes)"),
]


@pytest.mark.parametrize(("raw", "said"), [case[1:] for case in STDIN_NOT_UTF8], ids=[c[0] for c in STDIN_NOT_UTF8])
def test_fix_stdin_not_utf8_echoes_the_bytes(raw: bytes, said: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pipeline writing stdout back (`cfgopt fix - < cfg.yaml | sponge cfg.yaml`, an editor) keeps the file: it
    was emptied. The error is the file's own line, without the usage text of a usage error."""
    code, out, err = run_stdin(["fix", "-", "--stdin-filename", "cfg.yaml"], raw, monkeypatch)
    assert (code, out) == (2, raw)
    assert said in err and "usage:" not in err


@pytest.mark.parametrize(("raw", "said"), [case[1:] for case in STDIN_NOT_UTF8], ids=[c[0] for c in STDIN_NOT_UTF8])
def test_lint_stdin_not_utf8_is_one_line_as_for_a_file(
    raw: bytes, said: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, _, err = run_stdin(["lint", "-", "--stdin-filename", "cfg.yaml"], raw, monkeypatch)
    assert code == 2 and "usage:" not in err
    [line] = [line for line in err.splitlines() if ": error: " in line]
    (tmp_path / "cfg.yaml").write_bytes(raw)
    monkeypatch.chdir(tmp_path)
    assert line.startswith(said) and line in run_cli(["lint", "cfg.yaml"])[2]  # a file's line, word for word


def test_fix_stdin_utf16_json_is_named_json(monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, err = run_stdin(["fix", "-"], OURS["ds16.json"], monkeypatch)
    assert (code, out) == (2, OURS["ds16.json"]) and "stdin.json: error: UTF-16 encoded" in err
