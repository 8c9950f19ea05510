"""LF051 (issue 42): a pre-quantized checkpoint under ZeRO-3, held against LLaMA-Factory's real
`configure_quantization` (oracle: the installed release, 0.9.5)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from rule_cases import ROOT, run_cli

CASE = ROOT / "fixtures" / "rules" / "LF051" / "zero3"


@pytest.mark.parametrize(("method", "refused"), [("awq", True), ("gptq", True), ("bitsandbytes", True), ("fp8", False)])
def test_the_real_loader_refuses_what_lf051_reports(
    monkeypatch: pytest.MonkeyPatch, method: str, refused: bool
) -> None:
    quantization = pytest.importorskip("llamafactory.model.model_utils.quantization")
    monkeypatch.setattr(quantization, "is_deepspeed_zero3_enabled", lambda: True)
    monkeypatch.setattr(quantization, "check_version", lambda *a, **k: None)  # the method's own package
    config = SimpleNamespace(quantization_config={"quant_method": method})
    model_args = SimpleNamespace(quantization_bit=None, compute_dtype=None)
    raised = None
    try:
        quantization.configure_quantization(config, None, model_args, True, {})
    except ValueError as exc:
        raised = str(exc)
    except Exception:  # noqa: BLE001 - past the ZeRO-3 check: another part of loading (a package) stops it here
        raised = None
    assert (raised == "DeepSpeed ZeRO-3 or FSDP is incompatible with PTQ-quantized models.") is refused

    run = run_cli(
        [
            "lint",
            "--format",
            "json",
            "--select",
            "LF051",
            str(CASE / f"{'fp8' if method == 'fp8' else 'awq'}-local.yaml"),
        ]
    )
    assert ('"LF051"' in run[1]) is refused  # an AWQ checkpoint reported; FP8 not, as 0.9.5 dequantizes it


def test_a_model_without_quantization_config_is_not_reported(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text('{"model_type": "qwen2"}')
    (tmp_path / "ds.json").write_text('{"zero_optimization": {"stage": 3}}')
    yaml = "model_name_or_path: m\nstage: sft\ndo_train: true\nfinetuning_type: lora\ndeepspeed: ds.json\n"
    (tmp_path / "t.yaml").write_text(yaml + "dataset: d\ntemplate: qwen\noutput_dir: o\n")
    assert '"LF051"' not in run_cli(["lint", "--format", "json", "--select", "LF051", str(tmp_path / "t.yaml")])[1]
