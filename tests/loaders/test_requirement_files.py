"""Requirement files linted for the job's target (issue 25): which files, which pins, and when ENV001-ENV003 speak."""

from __future__ import annotations

import json
from pathlib import Path

from rule_cases import run_cli

from cfgopt.text.requirements.files import requirement_pins

TRAIN = """\
model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct
stage: sft
do_train: true
finetuning_type: lora
dataset: alpaca_en_demo
template: llama3
output_dir: saves/x
bf16: true
"""


def lint(*args: str) -> list[dict]:
    _code, out, _err = run_cli(["lint", "--format", "json", *args])
    return json.loads(out)["diagnostics"]


def test_a_cuda_torch_and_plain_flash_attn_on_rocm_are_reported_and_a_rocm_torch_is_not(tmp_path: Path) -> None:
    req = tmp_path / "requirements.txt"
    req.write_text("torch==2.5.1+cu121\nflash-attn\n")
    found = lint("--target", "mi300x", str(req))
    assert [(d["code"], d["line"]) for d in found] == [("ENV001", 1), ("ENV001", 2)]
    assert "download.pytorch.org/whl/rocm" in found[0]["message"] and "GPU_ARCHS=gfx942" in found[1]["message"]
    req.write_text("torch==2.5.1+rocm6.2\n")
    assert lint("--target", "mi300x", str(req)) == []
    req.write_text("torch==2.5.1+cu121\nflash-attn\n")
    assert lint("--target", "h100", str(req)) == []  # NVIDIA: the CUDA build is right
    assert lint("--target", "none", str(req)) == []  # no target: quiet (counted as skipped)


def test_a_folder_walk_finds_requirement_files_and_skips_unrelated_ones(tmp_path: Path) -> None:
    (tmp_path / "requirements-rocm.txt").write_text("--extra-index-url https://download.pytorch.org/whl/cu124\ntorch\n")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "web"\ndependencies = ["flask>=3"]\n')
    found = lint("--target", "mi300x", str(tmp_path))
    assert [(Path(d["file"]).name, d["code"]) for d in found] == [("requirements-rocm.txt", "ENV001")]
    assert "serves CUDA builds" in found[0]["message"]


def test_a_suppression_comment_in_a_requirements_file(tmp_path: Path) -> None:
    req = tmp_path / "requirements.txt"
    req.write_text("torch==2.5.1+cu121  # cfgopt: ignore[ENV001]\n")
    assert lint("--target", "mi300x", str(req)) == []


def test_pins_are_read_with_their_spans_from_every_kind_of_file() -> None:
    text = 'dependencies = ["torch==2.5.1+rocm6.2", "flash_attn @ https://x/flash_attn-2.7+rocm.whl"]\n'
    pins, _ = requirement_pins("pyproject.toml", text)
    assert [(p.name, p.spec) for p in pins] == [
        ("torch", "==2.5.1+rocm6.2"),
        ("flash_attn", "@ https://x/flash_attn-2.7+rocm.whl"),
    ]
    assert text[pins[0].spec_start : pins[0].spec_end] == "==2.5.1+rocm6.2"
    lock = '[[package]]\nname = "transformers"\nversion = "4.46.1"\n'
    pins, _ = requirement_pins("uv.lock", lock)
    assert [(p.name, p.spec, lock[p.spec_start : p.spec_end]) for p in pins] == [("transformers", "==4.46.1", "4.46.1")]
    poetry = '[tool.poetry.dependencies]\nname = "x"\ntorch = { version = "2.5.1", source = "rocm" }\n'
    assert [(p.name, p.spec) for p in requirement_pins("pyproject.toml", poetry)[0]] == [("torch", "2.5.1")]
    pins, indexes = requirement_pins("requirements.txt", "# torch==1.0\n-i https://download.pytorch.org/whl/rocm6.2\n")
    assert pins == [] and indexes[0][0] == "https://download.pytorch.org/whl/rocm6.2"


def test_versions_outside_the_llamafactory_release_are_judged_for_the_selected_release(tmp_path: Path) -> None:
    req = tmp_path / "requirements.txt"
    req.write_text("llamafactory==0.9.3\ntransformers==4.52.0\npeft==0.15.2\n")
    found = lint(str(req))
    assert [d["code"] for d in found] == ["ENV002"] and "LLaMA-Factory 0.9.3" in found[0]["message"]
    req.write_text("llamafactory==0.9.3\ntransformers>=4.40\n")  # a range: pip chooses
    assert lint(str(req)) == []
    # 0.9.5 checks accelerate<=1.15.0 at start-up but declares <=1.11.0 to pip
    req.write_text("llamafactory==0.9.5\naccelerate==1.12.0\n")
    found = lint(str(req))
    assert [d["code"] for d in found] == ["ENV002"] and "declares (accelerate>=1.3.0,<=1.11.0)" in found[0]["message"]


def test_bitsandbytes_without_rocm_only_when_a_config_of_the_run_uses_it(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("bitsandbytes<0.45\n")
    cfg = tmp_path / "train.yaml"
    cfg.write_text(TRAIN)
    assert [d for d in lint("--target", "mi300x", str(tmp_path)) if d["code"] == "ENV003"] == []
    cfg.write_text(TRAIN + "optim: paged_adamw_8bit\n")
    found = [d for d in lint("--target", "mi300x", str(tmp_path)) if d["code"] == "ENV003"]
    assert len(found) == 1 and "optim: paged_adamw_8bit" in found[0]["message"]
    assert [d for d in lint("--target", "h100", str(tmp_path)) if d["code"] == "ENV003"] == []
    cfg.write_text(TRAIN + "optim: adamw_torch_8bit\n")  # torchao's, not bitsandbytes'
    assert [d for d in lint("--target", "mi300x", str(tmp_path)) if d["code"] == "ENV003"] == []


def test_pins_that_cannot_install_together_are_an_error_where_the_metadata_says_so(tmp_path: Path) -> None:
    """Issue 42: torch 2.5.1 requires triton==3.1.0 (PyPI metadata, Linux x86_64): pip stops on triton==3.2.0."""
    req = tmp_path / "requirements.txt"
    req.write_text("torch==2.5.1\ntriton==3.2.0\nvllm==0.6.3\n")
    found = [d for d in lint(str(req)) if d["code"] == "ENV005"]
    assert [(d["line"], d["severity"]) for d in found] == [(1, "error"), (2, "error")]  # vllm 0.6.3: torch==2.4.0
    assert "requires triton==3.1.0" in found[1]["message"]


def test_builds_and_indexes_with_other_metadata_are_not_judged(tmp_path: Path) -> None:
    req = tmp_path / "requirements.txt"
    # a ROCm index's torch 2.5.1 requires pytorch-triton-rocm, not triton; a local build, a range: not judged
    req.write_text("--index-url https://download.pytorch.org/whl/rocm6.2\ntorch==2.5.1\ntriton==3.2.0\n")
    assert not [d for d in lint(str(req)) if d["code"] == "ENV005"]
    req.write_text("torch==2.5.1+cu121\ntriton==3.2.0\ndatasets==3.5.0\ntqdm>=4.60\n")
    assert not [d for d in lint(str(req)) if d["code"] == "ENV005"]


def test_a_line_pip_stops_on_is_a_parse_error_of_the_file(tmp_path: Path) -> None:
    """Issue (a new user's first hour, 8): `llamafactory==` in a named requirements-dev.txt was skipped with "no
    config files found" and exit 0, though pip stops on it. It is CFG001, exit 2; the other files are still judged."""
    req = tmp_path / "requirements-dev.txt"
    req.write_text("# dev tools\nllamafactory==\n")
    (tmp_path / "train.yaml").write_text(TRAIN + "flash_attn: true\n")
    code, out, err = run_cli(["lint", "--format", "json", str(req), str(tmp_path / "train.yaml")])
    found = json.loads(out)["diagnostics"]
    assert code == 2 and "no config files found" not in err
    assert [(d["code"], d["line"], d["column"]) for d in found if d["file"].endswith(".txt")] == [("CFG001", 2, 1)]
    message = found[0]["message"]
    assert message.startswith("invalid requirement `llamafactory==`")
    assert "pip stops with `Invalid requirement`" in message
    assert any(d["code"] == "LF003" for d in found)  # the YAML beside it: still linted
    req.write_text("torch=2.5.1\n")
    assert "did you mean `==`?" in lint(str(req))[0]["message"]


def test_a_folder_walk_reports_a_refused_line_only_in_a_file_of_the_training_stack(tmp_path: Path) -> None:
    """Walking a folder (and for pre-commit, --recognised-only), a requirements file is the job's when it names a
    package judged, on the refused line or another; one named on the command line is judged whatever it names."""
    (tmp_path / "requirements-dev.txt").write_text("llamafactory==\n")
    docs = tmp_path / "requirements-docs.txt"
    docs.write_text("sphinx=7.0\n")
    assert [(Path(d["file"]).name, d["code"]) for d in lint(str(tmp_path))] == [("requirements-dev.txt", "CFG001")]
    assert [d["code"] for d in lint("--recognised-only", str(docs))] == []
    assert [d["code"] for d in lint(str(docs))] == ["CFG001"]
    docs.write_text("sphinx==7.0\n")
    code, _, err = run_cli(["lint", str(docs)])
    assert code == 0 and "Checked 1 file(s)" in err and "no config files found" not in err


def test_the_warning_for_no_files_names_requirement_files(tmp_path: Path) -> None:
    code, _, err = run_cli(["lint", str(tmp_path)])
    assert code == 0 and "no config files found" in err and "requirement files" in err
