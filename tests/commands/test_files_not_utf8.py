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
