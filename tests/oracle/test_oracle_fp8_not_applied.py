"""What `fp8: true` really does under LLaMA-Factory 0.9.5 and the installed transformers 5: the arguments parsed
as `llamafactory-cli train` parses them, `configure_fp8_environment` (and, for `fp8_backend: te`,
`patch_accelerator_for_fp8`) called as the SFT trainer's `__init__` calls them, then the Trainer built on CPU
with a tiny Llama. Its Accelerator must not run FP8, and LF058 must name the precision it does run.

Each case runs in a fresh interpreter: the Accelerator's state and the environment variable are process-wide.
Transformer Engine is stood in for by an empty module (the patch reads only `te.fp8` from it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
from job_configs import FP8_LORA_8B

pytest.importorskip("llamafactory")
pytest.importorskip("transformers")

pytestmark = pytest.mark.oracle

ROOT = Path(__file__).resolve().parents[2]

# argv: bf16 ("1"/"0"), fp8_backend, output_dir; prints what the Trainer's Accelerator got, as JSON
_CHILD = """
import json, os, sys, types
os.environ.pop("ACCELERATE_MIXED_PRECISION", None)
bf16, backend = sys.argv[1] == "1", sys.argv[2]
if backend == "te":
    te = types.ModuleType("transformer_engine")
    te.pytorch = types.ModuleType("transformer_engine.pytorch")
    sys.modules["transformer_engine"], sys.modules["transformer_engine.pytorch"] = te, te.pytorch
from transformers import LlamaConfig, LlamaForCausalLM, Trainer
from llamafactory.hparams import get_train_args
from llamafactory.train.fp8_utils import configure_fp8_environment, patch_accelerator_for_fp8
args = dict(model_name_or_path="x", stage="sft", do_train=True, finetuning_type="lora", dataset="alpaca_en_demo",
            template="llama3", output_dir=sys.argv[3], fp8=True, fp8_backend=backend, bf16=bf16, use_cpu=True,
            report_to="none")
training_args = get_train_args(args)[2]
configure_fp8_environment(training_args)  # train/sft/trainer.py L62-65
if backend == "te":
    patch_accelerator_for_fp8()
model = LlamaForCausalLM(LlamaConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                     num_attention_heads=2, num_key_value_heads=2, vocab_size=64))
accelerator = Trainer(model=model, args=training_args).accelerator
print(json.dumps({"env": os.environ.get("ACCELERATE_MIXED_PRECISION"),
                  "mixed_precision": accelerator.mixed_precision, "fp8_enabled": accelerator.fp8_enabled}))
"""

YAML = FP8_LORA_8B + "fp8_backend: {backend}\nbf16: {bf16}\n"


def built_accelerator(tmp_path: Path, bf16: bool, backend: str) -> dict:
    env = {**os.environ, "DISABLE_VERSION_CHECK": "1"}
    env.pop("ACCELERATE_MIXED_PRECISION", None)
    argv = [sys.executable, "-c", _CHILD, "1" if bf16 else "0", backend, str(tmp_path / "out")]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def lf058_messages(tmp_path: Path, bf16: bool, backend: str) -> str:
    (tmp_path / "train.yaml").write_text(YAML.format(backend=backend, bf16=str(bf16).lower()))
    environment = f'environment={{ transformers = "{version("transformers")}" }}'
    argv = [sys.executable, "-m", "cfgopt", "lint", "--select", "LF058", "--config", environment, "train.yaml"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300).stdout


@pytest.mark.skipif(int(version("transformers").split(".")[0]) < 5, reason="the finding is about transformers 5")
@pytest.mark.parametrize(("bf16", "backend"), [(True, "auto"), (True, "te"), (False, "auto")])
def test_fp8_is_not_applied_and_lf058_says_so(tmp_path: Path, bf16: bool, backend: str) -> None:
    got = built_accelerator(tmp_path, bf16, backend)
    assert got["env"] == "fp8"  # LLaMA-Factory did ask for FP8
    assert got["mixed_precision"] != "fp8" and not got["fp8_enabled"]
    assert got["mixed_precision"] == ("bf16" if bf16 else "no")
    messages = lf058_messages(tmp_path, bf16, backend)
    if bf16:
        assert "LF058" in messages and "trains in bf16 mixed precision" in messages
    else:  # without bf16/fp16 a launch-time ACCELERATE_MIXED_PRECISION=fp8 would reach the Accelerator: silent
        assert "LF058" not in messages
