"""Every AMD claim holds for the GPU it names: CDNA2 (MI250X, MI210) is not judged as CDNA3 (issue 25)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from repo_paths import ROOT
from rule_cases import run_cli

FIXTURES = ROOT / "fixtures" / "rules"


def _messages(path: Path, *args: str) -> list[str]:
    _code, out, _err = run_cli(["lint", "--format", "json", "--extend-select", "ALL", *args, str(path)])
    return [d["message"] for d in json.loads(out)["diagnostics"]]


@pytest.mark.parametrize(("target", "says_fnuz"), [("mi250x", False), ("mi210", False), ("mi300x", True)])
def test_fp8_is_called_fnuz_only_on_cdna3(tmp_path: Path, target: str, says_fnuz: bool) -> None:
    cfg = shutil.copy(FIXTURES / "PF013" / "fp8" / "train.yaml", tmp_path / "train.yaml")
    text = " ".join(_messages(Path(cfg), "--target", target))
    assert ("FNUZ" in text) is says_fnuz
    assert "fp8: true" in text


@pytest.mark.parametrize(("target", "says_mesh"), [("mi250x", False), ("mi210", False), ("mi300x", True)])
def test_the_xgmi_mesh_is_judged_only_on_a_mesh_node(tmp_path: Path, target: str, says_mesh: bool) -> None:
    ds = shutil.copy(FIXTURES / "PF052" / "four-mi300x" / "ds.json", tmp_path / "ds.json")
    text = " ".join(_messages(Path(ds), "--target", target, "--gpus", "4"))
    assert ("xGMI" in text) is says_mesh


def test_torchao_8bit_adamw_is_not_called_bitsandbytes(tmp_path: Path) -> None:
    base = (FIXTURES / "PF012" / "bnb" / "good_torchao.yaml").read_text()
    assert "adamw_torch_8bit" in base
    cfg = tmp_path / "train.yaml"
    cfg.write_text(base)
    assert not any("bitsandbytes" in m for m in _messages(cfg, "--target", "mi300x"))
    cfg.write_text(base.replace("adamw_torch_8bit", "ademamix"))
    assert any("bitsandbytes" in m for m in _messages(cfg, "--target", "mi300x"))


def test_gds_on_rocm_is_an_error_only_where_the_op_is_loaded(tmp_path: Path) -> None:
    inert = shutil.copy(FIXTURES / "DS009" / "gds" / "ds.json", tmp_path / "ds.json")
    _code, out, _err = run_cli(["lint", "--format", "json", "--target", "mi300x", str(inert)])
    assert [d["severity"] for d in json.loads(out)["diagnostics"] if d["code"] == "DS009"] == ["info"]
    _code, out, _err = run_cli(["lint", "--format", "json", "--target", "h100", str(inert)])
    assert not [d for d in json.loads(out)["diagnostics"] if d["code"] == "DS009"]
