"""The seed configs (fixtures/seed) against the real tools: cfgopt's five errors are real, and after
`cfgopt fix --write --unsafe-fixes` the real parsers accept all three files. Also: the harness reproduces
every ground-truth verdict in the corpus (oracle-verdicts.jsonl).

Needs the pinned real packages (`pip install -e '.[oracle]'`); skipped cleanly without them.
"""

from __future__ import annotations

import contextlib
import io
import json
import shlex
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("llamafactory")
pytest.importorskip("deepspeed")
pytest.importorskip("omegaconf")

import oracle_harness as H

pytestmark = pytest.mark.oracle

SEED = H.ROOT / "fixtures" / "seed"
YAML, JSON_, SCRIPT = "llama3_lora_sft.yaml", "ds_z3_config.json", "train.sh"


def script_argv(path: Path) -> list[str]:
    """The arguments of the `llamafactory-cli train` command in a shell script (after the subcommand)."""
    text = path.read_text(encoding="utf-8").replace("\\\r\n", " ").replace("\\\n", " ")
    for line in text.splitlines():
        words = shlex.split(line, comments=True)
        if len(words) >= 2 and words[0] == "llamafactory-cli" and words[1] == "train":
            return words[2:]
    raise AssertionError(f"no `llamafactory-cli train` command in {path}")


def parse_cli_capturing(argv: list[str], cwd: Path) -> tuple[Any, str]:
    """(parsed dataclasses and leftovers, or the SystemExit) and what argparse wrote to stderr."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            return H.parse_cli(argv, "train", "mi300x", cwd=cwd), err.getvalue()
        except SystemExit as exc:
            return exc, err.getvalue()


def cfgopt_fix(folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cfgopt", "fix", "--write", "--unsafe-fixes", "."],
        cwd=folder,
        capture_output=True,
        text=True,
        check=False,
    )


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.fixture
def seed(tmp_path: Path) -> Path:
    for name in (YAML, JSON_, SCRIPT):
        shutil.copy(SEED / name, tmp_path / name)
    return tmp_path


def test_harness_targets_match_cfgopt() -> None:
    from cfgopt.knowledge.targets import TARGETS

    gpu = ("cuda", "rocm")
    facts = {name: (t.platform, t.bf16 or t.platform in gpu, t.is_cuda and t.tf32) for name, t in TARGETS.items()}
    assert facts == H.TARGETS


def test_seed_originals_cfgopt_and_real_tools_reject(seed: Path) -> None:
    errors = H.cfgopt_errors([seed], "--target", "mi300x", cwd=seed)
    # The five crashes DEVELOPERS.md names, and a sixth cfgopt found: the seed's JSON has no batch size (DS007).
    expected = Counter({"LF001": 2, "LF003": 2, "DS001": 1, "DS007": 1})
    assert Counter(d["code"] for d in errors) == expected, H.fmt_diags(errors)

    ok, error = H.lf_verdict(H.load_lf_yaml(seed / YAML), "train", "mi300x")
    assert not ok
    assert "compute_type" in error and "disable_torch_compile" in error, error

    ok, error = H.ds_verdict((seed / JSON_).read_text(encoding="utf-8"))
    assert not ok
    assert "stage3_parition_grads" in error and "Extra inputs are not permitted" in error, error

    result, stderr = parse_cli_capturing(script_argv(seed / SCRIPT), seed)
    assert isinstance(result, SystemExit) and result.code == 2, result
    assert "invalid choice" in stderr and "'Fa'" in stderr, stderr


def test_seed_json_without_the_typo_still_fails_for_its_missing_batch_size(seed: Path) -> None:
    """DS007 is real: with `stage3_parition_grads` removed, the HF Trainer path still fails in DeepSpeed."""
    data = json.loads((seed / JSON_).read_text(encoding="utf-8"))
    del data["zero_optimization"]["stage3_parition_grads"]
    training = H.load_lf_yaml(seed / YAML)
    training.pop("compute_type")
    training.pop("disable_torch_compile")
    training["bf16"] = True
    ok, error = H.ds_verdict(json.dumps(data), training_args=training)
    assert not ok and "Either train_batch_size or train_micro_batch_size_per_gpu" in error, error


def test_seed_yaml_flash_attn_true_fails_at_model_load(seed: Path) -> None:
    """Without the two unknown keys the YAML parses, and `flash_attn: true` is what fails (model load)."""
    cfg = H.load_lf_yaml(seed / YAML)
    cfg.pop("compute_type")
    cfg.pop("disable_torch_compile")
    verdict = H.lf_verdict_detail(cfg, "train", "mi300x")
    assert not verdict.ok and verdict.stage == "enum"
    assert "Unknown attention type: True" in verdict.error


@pytest.fixture
def fixed_seed(seed: Path) -> Path:
    proc = cfgopt_fix(seed)
    assert proc.returncode == 0, proc.stderr
    return seed


def test_seed_fixed_cfgopt_clean(fixed_seed: Path) -> None:
    errors = H.cfgopt_errors([fixed_seed], "--target", "mi300x", cwd=fixed_seed)
    assert errors == [], H.fmt_diags(errors)


def test_seed_fixed_yaml_accepted(fixed_seed: Path) -> None:
    assert H.lf_verdict(H.load_lf_yaml(fixed_seed / YAML), "train", "mi300x") == (True, "")


def test_seed_fixed_json_accepted(fixed_seed: Path) -> None:
    fixed = H.load_lf_yaml(fixed_seed / YAML)
    assert H.ds_verdict((fixed_seed / JSON_).read_text(encoding="utf-8"), training_args=fixed) == (True, "")


def test_seed_fixed_launch_accepted_with_deepspeed_followed(fixed_seed: Path) -> None:
    """The whole launch, DeepSpeed JSON included (ZeRO-3 checks, "auto" filling, HF <-> DeepSpeed match)."""
    fixed = H.load_lf_yaml(fixed_seed / YAML)
    verdict = H.lf_verdict_detail(fixed, "train", "mi300x", follow_deepspeed=True, base_dir=fixed_seed)
    assert verdict.ok, verdict


def test_seed_fixed_script_accepted(fixed_seed: Path) -> None:
    result, stderr = parse_cli_capturing(script_argv(fixed_seed / SCRIPT), fixed_seed)
    assert not isinstance(result, SystemExit), stderr
    parsed, remaining = result
    assert remaining == []
    model_args = parsed[0]
    assert H.flash_attn_error(model_args) == ""


def test_seed_fix_is_idempotent(seed: Path) -> None:
    first = cfgopt_fix(seed)
    assert first.returncode == 0, first.stderr
    after_first = snapshot(seed)
    second = cfgopt_fix(seed)
    assert second.returncode == 0, second.stderr
    assert snapshot(seed) == after_first
    assert "Fixed 0 problem(s)" in second.stderr, second.stderr


# --------------------------------------------------------------------------------------------- corpus


RECORDS = H.corpus_verdicts() if H.VERDICTS.is_file() else []


@pytest.mark.skipif(not RECORDS, reason="corpus not present")
@pytest.mark.parametrize("record", RECORDS, ids=[r["file"] for r in RECORDS])
def test_harness_reproduces_corpus_verdict(record: dict[str, Any]) -> None:
    verdict = H.corpus_verdict(record)
    assert verdict.ok == record["ok"], f"{record['file']}: harness {verdict}, recorded {json.dumps(record)[:400]}"
