"""The memory model (cfgopt/memory/), `cfgopt estimate`, and the calibration table (bench/memory)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from rule_cases import ROOT, run_cli

from cfgopt.job.job import lf_values
from cfgopt.knowledge import schema
from cfgopt.knowledge.model_shapes import ModelShape, shape_for
from cfgopt.knowledge.targets import TARGETS
from cfgopt.memory import activations
from cfgopt.memory import estimate as memory
from cfgopt.memory.buffers import AUTOCAST_COPIES

L8 = shape_for("meta-llama/Meta-Llama-3-8B")
L1 = ModelShape("Llama-3.2-1B", 2048, 8192, 16, 32, 8, 128256, True)  # the 1.24B probe of rocm_perf §5.3
H200, MI300X = TARGETS["h200"], TARGETS["mi300x"]
LORA = {"stage": "sft", "do_train": True, "finetuning_type": "lora", "bf16": True, "cutoff_len": 2048}


def values(config: dict) -> dict:
    """The values LLaMA-Factory sees (the job model fills the defaults; the memory model knows none)."""
    return lf_values(config, schema.llamafactory())


def est(config: dict, shape: ModelShape = L8, target=H200, gpus: int = 1, ds: dict | None = None, **kw):
    return memory.estimate(values({**LORA, **config}), shape, target, gpus, ds, **kw)


def within(value: float, measured: float, tolerance: float) -> bool:
    return abs(value - measured) / measured <= tolerance


# --------------------------------------------------------------------------------------------- known points


def test_hf_peft_8b_lora_points() -> None:
    """docs/evidence/rocm_perf.md §5.3: Llama-3-8B LoRA r16 all-linear, 8192 tokens: 82.35 GiB without GC, 31.3 with.
    Another stack (HF + PEFT driven directly, not LLaMA-Factory): held-out points, hence the wider
    tolerances; LLaMA-Factory's own runs are held to 5% / 15% in bench/memory (test below)."""
    base = {"lora_rank": 16, "packing": True, "per_device_train_batch_size": 4}
    assert within(est({**base, "disable_gradient_checkpointing": True}).peak_allocated_gib, 82.35, 0.04)
    assert within(est(base).peak_allocated_gib, 31.3, 0.08)
    qv = est({**base, "lora_target": "q_proj,v_proj", "disable_gradient_checkpointing": True})
    assert within(qv.peak_allocated_gib, 66.9, 0.04)
    dropout = est({**base, "lora_dropout": 0.05, "disable_gradient_checkpointing": True})
    assert within(dropout.peak_allocated_gib, 82.35 + 9.4, 0.04)


def test_full_finetune_1b_points() -> None:
    """1.24B full fine-tune, 8192 tokens, HF AMP: 46.78 GiB without GC (18 bytes/param), 30.2 with (16)."""
    full = {"finetuning_type": "full", "packing": True, "per_device_train_batch_size": 4}
    assert L1.num_parameters == 1_235_814_400
    assert within(est({**full, "disable_gradient_checkpointing": True}, L1).peak_allocated_gib, 46.78, 0.05)
    assert within(est(full, L1).peak_allocated_gib, 30.2, 0.10)
    # 18 bytes/parameter without checkpointing (autocast's weight copies held), 16 with it (measured, both)
    for extra, per_param in (({"disable_gradient_checkpointing": True}, 18), ({}, 16)):
        states = est({**full, **extra}, L1)
        held = ("weights", "gradients", "optimizer states", AUTOCAST_COPIES)
        total = sum(states.gib(name) for name in held) * 2**30
        assert total == pytest.approx(per_param * L1.num_parameters)


def test_accumulation_holds_a_full_finetunes_gradients_through_the_next_forward() -> None:
    """The HF Trainer zeroes gradients after the optimizer step only: with accumulation, the next micro-batch's
    forward runs beside the earlier ones' gradients (H200, Qwen3-4B full, 1 x 2 without GC: 78.8 GiB
    allocated, bench/memory/measured/*_tune_*). ZeRO-3 keeps its partition anyway; LoRA's are persistent."""
    full = {"finetuning_type": "full", "packing": True, "disable_gradient_checkpointing": True}
    once = est({**full, "per_device_train_batch_size": 1, "gradient_accumulation_steps": 1}, L1)
    twice = est({**full, "per_device_train_batch_size": 1, "gradient_accumulation_steps": 2}, L1)
    assert twice.phases()["loss"] == pytest.approx(once.phases()["loss"] + once.gib("gradients"))
    lora = est({"per_device_train_batch_size": 1, "gradient_accumulation_steps": 2}, L1)
    assert lora.phases()["loss"] == pytest.approx(
        est({"per_device_train_batch_size": 1, "gradient_accumulation_steps": 1}, L1).phases()["loss"]
    )
    qwen3 = shape_for("Qwen/Qwen3-4B")
    measured = est(
        {
            **full,
            "enable_liger_kernel": True,
            "flash_attn": "sdpa",
            "per_device_train_batch_size": 1,
            "gradient_accumulation_steps": 2,
        },
        qwen3,
    )
    assert within(measured.peak_allocated_gib, 78.8, 0.05)


def test_lora_trainable_count_and_static() -> None:
    e = est({"packing": True, "per_device_train_batch_size": 1})
    assert e.trainable_params == 20_971_520  # rank 8, all linears (bench/h200/measurements.md)
    assert e.gib("weights") == pytest.approx(15.04, abs=0.05)  # the resident model after load


def test_calibration_table_meets_the_target_leaving_each_family_out() -> None:
    """bench/memory: >= 40 measured runs over >= 4 families; median <= 5%, worst <= 15%, for the shipped model
    and with the fitted constants refitted without the family estimated (leave one family out)."""
    sys.path.insert(0, str(ROOT / "bench" / "memory"))
    import compare

    rows = [compare.compare_one(p) for p in compare._runs(compare.MEASURED)]
    assert len(rows) >= compare.MIN_RUNS and len({r["family"] for r in rows}) >= compare.MIN_FAMILIES
    compare.leave_one_family_out(rows)
    assert compare.meets_target(rows), compare.table(rows)
    # the refit leaves the memory model as shipped
    assert activations.LOGITS_BYTES_PER_VOCAB == 12


def test_issue_16_qwen3_points_within_ten_percent() -> None:
    sys.path.insert(0, str(ROOT / "bench" / "memory"))
    import compare

    text = compare.issue_points()
    errors = [float(cell.strip().rstrip("%")) for line in text.splitlines()[2:] for cell in line.split("|")[3::2][:2]]
    assert len(errors) == 12 and all(abs(e) <= 10 for e in errors), text


# --------------------------------------------------------------------------------------------- directions


def test_components_move_the_right_way() -> None:
    packed = {"packing": True, "per_device_train_batch_size": 4}
    sdpa, eager = est(packed), est({**packed, "flash_attn": "disabled"})
    assert eager.gib("attention scores") > 0 and sdpa.gib("attention scores") == 0
    assert est({**packed, "enable_liger_kernel": True}).peak_allocated_gib < sdpa.peak_allocated_gib
    assert est({**packed, "disable_gradient_checkpointing": True}).peak_allocated_gib > sdpa.peak_allocated_gib
    q4 = est({**packed, "quantization_bit": 4})
    assert q4.gib("weights") < 0.5 * sdpa.gib("weights") and q4.quantization_bit == 4
    assert est({**packed, "model_name_or_path": "TechxGenus/Meta-Llama-3-8B-Instruct-AWQ"}).quantization_bit == 4
    assert est({**packed, "stage": "dpo"}).tokens == 2 * sdpa.tokens
    # unpacked: the peak batch reaches cutoff_len unless told otherwise
    assert est({"per_device_train_batch_size": 4}).tokens == 8192
    assert est({"per_device_train_batch_size": 4}, fill=0.5).tokens == 4096


def test_zero_partitioning_and_offload() -> None:
    full = {"finetuning_type": "full", "packing": True, "per_device_train_batch_size": 1}

    def ds(stage: int, **zero) -> dict:
        return {"bf16": {"enabled": "auto"}, "zero_optimization": {"stage": stage, **zero}}

    def states(e) -> float:
        return e.gib("weights") + e.gib("gradients") + e.gib("optimizer states")

    by_stage = [states(est(full, gpus=8, ds=ds(s))) for s in (0, 1, 2, 3)]
    assert by_stage == sorted(by_stage, reverse=True) and by_stage[0] > 3 * by_stage[3]
    assert states(est(full, gpus=8, ds=ds(3))) == pytest.approx(16 * L8.num_parameters / 8 / 2**30)
    assert states(est(full, gpus=4, ds=ds(3))) > states(est(full, gpus=8, ds=ds(3)))
    offload = est(full, gpus=8, ds=ds(3, offload_optimizer={"device": "cpu"}, offload_param={"device": "cpu"}))
    assert offload.gib("optimizer states") == 0 and offload.gib("weights") == 0 and offload.offloaded_gib > 0
    # ZeRO-3 on one GPU shards nothing (bench/h200/measurements.md V2 vs V4: 21.1 vs 21.0 GiB)
    one = est({"per_device_train_batch_size": 4}, ds=ds(3), fill=832 / 2048)
    assert within(
        one.peak_allocated_gib, est({"per_device_train_batch_size": 4}, fill=832 / 2048).peak_allocated_gib, 0.02
    )
    assert est(full, gpus=8, ds={"zero_optimization": {"stage": "auto"}}).unmodelled


@pytest.mark.parametrize("ftype", ["lora", "full", "freeze", "oft"])
def test_max_micro_batch_is_monotonic(ftype: str) -> None:
    config = {"finetuning_type": ftype, "packing": True, "per_device_train_batch_size": 1}
    sizes = [
        memory.max_micro_batch(values({**LORA, **config}), L8, TARGETS[t], 1, None) for t in ("h100", "h200", "mi300x")
    ]
    assert sizes == sorted(sizes)
    longer = memory.max_micro_batch(values({**LORA, **config, "cutoff_len": 8192}), L8, MI300X, 1, None)
    assert longer <= sizes[-1]
    no_gc = memory.max_micro_batch(
        values({**LORA, **config, "disable_gradient_checkpointing": True}), L8, MI300X, 1, None
    )
    # freeze: without GC the frozen layers before the trainable ones keep nothing (no input requires grad),
    # with GC every layer keeps its checkpoint input: either may fit more (not measured), so no direction
    assert no_gc > 0 if ftype == "freeze" else no_gc <= sizes[-1]
    best = sizes[-1]
    if best:
        assert est({**config, "per_device_train_batch_size": best}, target=MI300X).fits_with_headroom()
        assert not est({**config, "per_device_train_batch_size": best + 1}, target=MI300X).fits_with_headroom()
    peaks = [est({**config, "per_device_train_batch_size": b}).peak_allocated_gib for b in (1, 2, 4, 8)]
    assert peaks == sorted(peaks)


def test_full_70b_on_one_gpu_fits_nothing() -> None:
    shape = shape_for("meta-llama/Meta-Llama-3-70B")
    assert memory.max_micro_batch(values({**LORA, "finetuning_type": "full"}), shape, MI300X, 1, None) == 0


def test_memory_reads_defaults_from_the_selected_snapshot() -> None:
    """No default lives in the memory model: a key absent from the config has the snapshot's default."""
    assert not hasattr(memory, "DEFAULTS")
    assert est({}).micro_batch == schema.llamafactory().group("train")["per_device_train_batch_size"].default


def test_estimate_exposes_peak_gib_for_tune() -> None:
    e = est({"packing": True, "per_device_train_batch_size": 4})
    assert e.peak_gib == e.required_gib > e.peak_allocated_gib


# --------------------------------------------------------------------------------------------- the command


def _write(tmp_path: Path, text: str, name: str = "train.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


CONFIG = """\
model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct
stage: sft
do_train: true
finetuning_type: lora
bf16: true
packing: true
cutoff_len: 2048
per_device_train_batch_size: {bsz}
gradient_accumulation_steps: 2
{extra}
"""


def test_estimate_command_json_and_exit_codes(tmp_path: Path) -> None:
    fits = _write(tmp_path, CONFIG.format(bsz=4, extra=""))
    code, out, _ = run_cli(["estimate", str(fits), "--target", "mi300x", "--gpus", "8", "--format", "json"])
    data = json.loads(out)
    assert code == 0 and data["fits"] and data["model"] == "Llama-3-8B" and data["gpus"] == 8
    assert data["max_micro_batch"] >= 4 and data["global_batch"] == 4 * 2 * 8
    for key in ("weights_gib", "activations_gib", "logits_gib", "required_gib", "notes"):
        assert key in data
    parts = {c["name"]: c for c in data["components"]}  # the same figures, one record per component
    assert parts["weights"]["gib"] == data["weights_gib"] and parts["weights"]["phases"] == ["states"]
    assert parts["logits / loss"]["phases"] == ["loss"] and {"counted", "source"} <= parts["weights"].keys()
    on_gpu = [c for c in data["components"] if "host" not in c["phases"]]
    states = sum(c["gib"] for c in on_gpu if "states" in c["phases"])
    phase = max(sum(c["gib"] for c in on_gpu if p in c["phases"]) for p in ("loss", "backward", "step"))
    assert states + phase == pytest.approx(data["peak_allocated_gib"])
    code, out, _ = run_cli(["estimate", str(fits), "--target", "mi300x"])
    assert code == 0 and "= required per GPU" in out and "largest per_device_train_batch_size" in out

    oom = _write(tmp_path, CONFIG.format(bsz=16, extra="disable_gradient_checkpointing: true"), "oom.yaml")
    code, out, _ = run_cli(["estimate", str(oom), "--target", "h100"])
    assert code == 1 and "fits: NO" in out


# LLaMA-Factory 0.9.5's examples/train_lora/qwen3_lora_dpo.yaml, the keys the estimate reads: 94% of a 24 GiB card
TIGHT_DPO = """model_name_or_path: Qwen/Qwen3-4B-Instruct-2507
stage: dpo
do_train: true
finetuning_type: lora
lora_rank: 8
lora_target: all
dataset: dpo_en_demo
template: qwen3_nothink
cutoff_len: 2048
output_dir: out
per_device_train_batch_size: 1
gradient_accumulation_steps: 8
bf16: true
"""


def test_estimate_json_says_the_verdict_the_text_says(tmp_path: Path) -> None:
    """One verdict (issue 23): a tight estimate is no fit in the JSON either (`fits` false, `verdict` "tight"),
    with the text's TIGHT and exit 1."""
    path = _write(tmp_path, TIGHT_DPO, "dpo.yaml")
    args = ["estimate", str(path), "--target", "rtx4090", "--gpus", "1"]
    code, out, _ = run_cli([*args, "--format", "json"])
    data = json.loads(out)
    assert code == 1 and data["verdict"] == "tight" and data["fits"] is False and data["max_micro_batch"] == 0
    assert 0.9 * 24 < data["required_gib"] <= 24
    code, out, _ = run_cli(args)
    assert code == 1 and "fits: TIGHT" in out
    code, out, _ = run_cli([*args[:2], "--target", "h100", "--gpus", "1", "--format", "json"])
    assert code == 0 and (json.loads(out)["verdict"], json.loads(out)["fits"]) == ("fits", True)


def test_estimate_command_unknown_model_and_errors(tmp_path: Path) -> None:
    unknown = _write(tmp_path, CONFIG.format(bsz=4, extra="").replace("meta-llama/Meta-Llama-3-8B-Instruct", "x/y"))
    code, out, err = run_cli(["estimate", str(unknown), "--target", "mi300x"])
    assert code == 2 and out == "" and "unknown model" in err and "no estimate" in err
    assert run_cli(["estimate", str(tmp_path / "missing.yaml"), "--target", "mi300x"])[0] == 2
    with pytest.raises(SystemExit) as usage:  # a bad value is argparse's usage error: exit 2 with the usage
        run_cli(["estimate", str(unknown), "--gpus", "0"])
    assert usage.value.code == 2
    assert run_cli(["estimate", str(unknown), "--target", "cpu"])[0] == 2
    missing_ds = _write(tmp_path, CONFIG.format(bsz=4, extra="deepspeed: nowhere.json"), "ds.yaml")
    code, _, err = run_cli(["estimate", str(missing_ds), "--target", "mi300x"])
    assert code == 2 and "nowhere.json" in err


def test_estimate_command_local_config_and_deepspeed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = tmp_path / "tiny"
    model.mkdir()
    (model / "config.json").write_text(
        json.dumps(
            {
                "model_type": "llama",
                "hidden_size": 2048,
                "intermediate_size": 8192,
                "num_hidden_layers": 16,
                "num_attention_heads": 32,
                "num_key_value_heads": 8,
                "vocab_size": 128256,
                "tie_word_embeddings": True,
            }
        )
    )
    (tmp_path / "ds.json").write_text(json.dumps({"bf16": {"enabled": "auto"}, "zero_optimization": {"stage": 2}}))
    cfg = _write(
        tmp_path,
        CONFIG.format(bsz=4, extra="deepspeed: ds.json")
        .replace("meta-llama/Meta-Llama-3-8B-Instruct", "tiny")
        .replace("finetuning_type: lora", "finetuning_type: full"),
    )
    code, out, _ = run_cli(["estimate", str(cfg), "--target", "mi300x", "--gpus", "4", "--format", "json"])
    data = json.loads(out)
    assert code == 0 and data["model"] == "tiny" and data["zero_stage"] == 2
    assert data["total_params"] == L1.num_parameters
    monkeypatch.chdir(tmp_path)  # the DeepSpeed JSON as every report shows a path: relative, never this machine's
    _, out, _ = run_cli(["estimate", cfg.name, "--target", "mi300x", "--gpus", "4"])
    assert out.splitlines()[0].endswith(", ZeRO-2 (ds.json)") and str(tmp_path) not in out
    _, out, _ = run_cli(["estimate", cfg.name, "--target", "mi300x", "--gpus", "4", "--format", "json"])
    assert json.loads(out)["deepspeed"] == "ds.json"


# --------------------------------------------------------------------------------------------- rules


def test_memory_rules_silent_for_unknown_models(tmp_path: Path) -> None:
    text = CONFIG.format(bsz=64, extra="disable_gradient_checkpointing: true")
    known = _write(tmp_path, text, "known.yaml")
    unknown = _write(tmp_path, text.replace("meta-llama/Meta-Llama-3-8B-Instruct", "my-org/house-model"), "u.yaml")
    for path, expect in ((known, {"MEM001"}), (unknown, set())):
        _, out, _ = run_cli(["lint", "--format", "json", "--select", "MEM", "--target", "h100", str(path)])
        assert {d["code"] for d in json.loads(out)["diagnostics"]} == expect, path.name


def test_memory_fixes_keep_the_global_batch(tmp_path: Path) -> None:
    cfg = _write(tmp_path, CONFIG.format(bsz=32, extra=""))
    run_cli(["fix", "--write", "--unsafe-fixes", "--select", "MEM001", "--target", "h100", "--gpus", "1", str(cfg)])
    import yaml

    data = yaml.safe_load(cfg.read_text())
    assert data["per_device_train_batch_size"] < 32
    assert data["per_device_train_batch_size"] * data["gradient_accumulation_steps"] == 32 * 2


def test_confidence_says_what_no_run_covers() -> None:
    qwen3 = shape_for("Qwen/Qwen3-4B")
    high = est({"packing": True, "per_device_train_batch_size": 8, "enable_liger_kernel": True}, qwen3)
    assert high.confidence == "high" and "H200" in high.confidence_line()
    multi = est({"packing": True, "per_device_train_batch_size": 8}, qwen3, target=MI300X, gpus=8)
    assert multi.confidence == "medium"
    assert "8 GPUs" in multi.confidence_line() and "mi300x" in multi.confidence_line()
    unknown = ModelShape("Phi-3-mini", 3072, 8192, 32, 32, 32, 32064, False, model_type="phi3")
    assert "architecture 'phi3'" in est({"packing": True}, unknown).confidence_line()
    galore = est({"packing": True, "use_galore": True}, qwen3)
    assert galore.confidence == "none" and "GaLore" in galore.confidence_line()


def test_estimate_prints_the_confidence(tmp_path: Path) -> None:
    config = tmp_path / "train.yaml"
    config.write_text(
        "model_name_or_path: Qwen/Qwen3-4B\nstage: sft\ndo_train: true\nfinetuning_type: lora\nbf16: true\n"
        "packing: true\nper_device_train_batch_size: 8\ndataset: alpaca_en_demo\noutput_dir: out\n"
    )
    code, out, _ = run_cli(["estimate", str(config), "--target", "h200"])
    assert code == 0 and "confidence: high" in out


@pytest.mark.parametrize(
    ("model", "parameters", "model_type"),
    [
        ("meta-llama/Llama-3.2-1B", 1_235_814_400, "llama"),
        ("Qwen/Qwen2.5-1.5B", 1_543_714_304, "qwen2"),
        ("Qwen/Qwen3-1.7B", 1_720_574_976, "qwen3"),
        ("Qwen/Qwen3-4B", 4_022_468_096, "qwen3"),
        ("google/gemma-2-2b", 2_614_341_888, "gemma2"),
        ("mistralai/Mistral-7B-v0.3", 7_248_023_552, "mistral"),
    ],
)
def test_table_shapes_match_the_models_the_harness_built(model: str, parameters: int, model_type: str) -> None:
    """Parameter counts of the random-init models bench/memory/harness.py built from each config.json."""
    shape = shape_for(model)
    assert shape is not None and shape.num_parameters == parameters and shape.model_type == model_type


# --------------------------------------------------------------------------------------------- fp16 + ZeRO-3

Z3_STOCK = json.loads((ROOT / "bench/planner/examples/deepspeed/ds_z3_config.json").read_text())
FULL_FP16 = {
    "finetuning_type": "full",
    "bf16": False,
    "fp16": True,
    "per_device_train_batch_size": 1,
    "gradient_accumulation_steps": 2,
}


def test_fp16_zero3_overflow_check_explains_the_oom() -> None:
    """Issue 23: Llama-3-8B full, fp16, LLaMA-Factory's stock ZeRO-3 JSON, 1 x 2 on one H200 died with 119.8 GiB
    allocated and 15.0 GiB asked. DeepSpeed's fp16 overflow check runs torch.isinf over the whole 16-bit
    gradient partition: a 16-bit copy (the 15.0 GiB asked) and a bool mask, on top of the model states."""
    e = est(FULL_FP16, ds=Z3_STOCK)
    assert e.persistent_gib == pytest.approx(119.8, abs=0.15)  # allocated when it died
    assert 2.0 * e.trainable_params / 2**30 == pytest.approx(15.0, abs=0.05)  # isinf's abs() copy: the ask
    assert e.gib("fp16 overflow check") == pytest.approx(3.0 * e.trainable_params / 2**30)
    assert e.peak_phase == "overflow check" and e.verdict == "over" and e.surely_out_of_memory
    assert "fp16 with ZeRO-3" in e.confidence_line()
    bf16 = est({**FULL_FP16, "fp16": False, "bf16": True}, ds=Z3_STOCK)
    assert not bf16.gib("fp16 overflow check") and bf16.peak_phase == "step"
    assert bf16.required_gib == pytest.approx(136.3, abs=0.05)  # the old figure: bf16 has no such check


def test_zero3_step_moments_need_the_partition_on_the_gpu() -> None:
    offload = {
        **Z3_STOCK,
        "zero_optimization": {**Z3_STOCK["zero_optimization"], "offload_optimizer": {"device": "cpu"}},
    }
    e = est(FULL_FP16, ds=offload)
    assert not e.gib("fp16 overflow check") and not e.gib("gradient norm (fp64)")
    # the clipping norm's fp64 copy of the largest trained parameter (the embedding), one moment of its own
    full = est(FULL_FP16, ds=Z3_STOCK, gpus=8)
    assert full.gib("gradient norm (fp64)") == pytest.approx(8 * 128256 * 4096 / 8 / 2**30, rel=1e-6)
    assert not est({"fp16": True, "bf16": False}, ds=Z3_STOCK).gib("gradient norm (fp64)")  # LoRA: tiny
    assert {"overflow check", "grad norm"} <= full.phases().keys() and "grad norm" not in est({}).phases()


def test_estimate_command_names_the_overflow_check() -> None:
    config = ROOT / "bench/planner/examples/train_full/llama3_full_sft_fp16.yaml"
    code, out, _ = run_cli(["estimate", str(config), "--target", "h200", "--gpus", "1"])
    assert code == 1 and "fp16 overflow check" in out and "fits: NO" in out and "overflow check phase" in out
