"""One environment for every judgement (issue 41): a check that needs a package to bite constrains the speed plan
only where the job's environment has that package (LF019 needs flash-attn), the plan says what runs there, keeps
the job's meaning (plain packing is shown, never applied), and plans stochastic rounding by model size."""

from __future__ import annotations

import shutil
from pathlib import Path

from rule_cases import ROOT, run_cli

from cfgopt.environment import Environment
from cfgopt.job.settings import Settings
from cfgopt.knowledge import methods
from cfgopt.knowledge.versions import VersionRange
from cfgopt.plan import space
from cfgopt.plan.expected_speed import NEAT_WITHOUT_FA2, plan_speed, runtime_of
from cfgopt.plan.planner import plan_for
from cfgopt.plan.wording import FA2_FALLS_BACK, description
from cfgopt.project.loader import load_job

EXAMPLES = ROOT / "bench" / "planner" / "examples" / "train_full"
QWEN25_FA2 = EXAMPLES / "qwen25_7b_full_sft_ds3.yaml"  # flash_attn: fa2, 4 x 2, cutoff 12000, stock ZeRO-3 JSON
FA2_LORA = ROOT / "fixtures" / "rules" / "LF006" / "fa3" / "good_fa2.yaml"  # fa2, the default micro-batch of 8
NODE = {"llamafactory": "==0.9.5", "liger_kernel": "", "bitsandbytes": "", "deepspeed": ""}
WITH_FLASH_ATTN = Environment({**NODE, "flash_attn": "==2.8.3"}, "node.txt")
WITH_TORCHAO = Environment({**NODE, "torchao": "==0.17.0", "transformers": "==5.6.0"}, "node.txt")
# a new user's LoRA SFT (exploratory test, finding 2) with `fa2` whose requirements.txt has no flash-attn
NEW_USER_SFT = """model_name_or_path: Qwen/Qwen2.5-7B-Instruct
stage: sft
do_train: true
finetuning_type: lora
lora_target: all
dataset: alpaca_en_demo
template: qwen
cutoff_len: 2048
output_dir: out
per_device_train_batch_size: 2
gradient_accumulation_steps: 8
learning_rate: 1.0e-4
bf16: true
flash_attn: fa2
"""


def _plan(path: Path, environment: Environment | None = None, target: str = "h200"):
    plan = plan_for(load_job(path, Settings(target_name=target, gpus=1, environment=environment)))
    assert plan is not None
    return plan


def test_fa2_without_flash_attn_keeps_the_micro_batch_memory_allows() -> None:
    """The held-out Qwen2.5-7B full SFT with `fa2` in the assumed environment (no flash-attn): `fa2` runs SDPA,
    the collator never asserts, so the neat packing the plan turns on keeps the 4 rows per micro-batch (the last
    plan's 1 x 8 ran 0.62x of 4 rows per micro-batch on the H200). It writes `flash_attn: sdpa`, what runs, so the
    file does not stop at LF019's assertion once flash-attn is installed, and says why."""
    plan = _plan(QWEN25_FA2)
    assert plan.best.packing and plan.best.micro == 4 and plan.changes.get("neat_packing") is True
    assert plan.changes.get("flash_attn") == "sdpa"
    words = (
        "`flash_attn: sdpa` written: what `fa2` runs here (flash-attn not in the environment), at the same expected "
        "speed; with `fa2` neat packing at 4 rows per micro-batch would stop at the first batch once flash-attn is "
        "installed (LLaMA-Factory 0.9.5, LF019)"
    )
    assert words in description(plan) and words in plan.notes
    assert "does not bind" not in description(plan)


def test_writing_sdpa_keeps_the_expected_speed() -> None:
    """`fa2` without flash-attn is ranked as SDPA: the `flash_attn: sdpa` the plan writes with neat packing changes
    neither the step time the priors expect nor the estimated peak (no new measurement behind the plan)."""
    job = load_job(QWEN25_FA2, Settings(target_name="h200", gpus=1))
    plan = plan_for(job)
    assert plan is not None and plan.best.attn == "sdpa" and plan.base.attn == "fa2"
    as_fa2 = plan.best._replace(attn="fa2")
    stage, run = methods.stage_of(job.values()), runtime_of(job)
    assert plan_speed(plan.best, plan.base, 1, stage, None, run) == plan_speed(as_fa2, plan.base, 1, stage, None, run)
    peak = job.estimate(1, deepspeed=None, **{**plan.changes, "flash_attn": "fa2"})
    assert peak is not None and round(peak.required_gib) == round(plan.est_gib)


def test_fix_with_neat_packing_and_no_flash_attn_converges(tmp_path: Path) -> None:
    """The new user's LoRA SFT with `fa2` and a requirements.txt without flash-attn (an exploratory test's finding): the
    plan adds neat packing at 4 rows per micro-batch and writes `flash_attn: sdpa` with it, so LF019 has nothing
    to say about the written file; a second `fix` changes nothing and exits 0."""
    path = tmp_path / "sft.yaml"
    path.write_text(NEW_USER_SFT)
    (tmp_path / "requirements.txt").write_text("llamafactory[liger-kernel]==0.9.5\n")
    options = ["--target", "h100", "--gpus", "8", "--write", "--unsafe-fixes"]
    code, out, err = run_cli(["fix", *options, str(path)])
    text = path.read_text()
    assert code == 0 and "LF019 warning" not in out + err and "0 remaining" in out + err
    assert "neat_packing: true" in text and "per_device_train_batch_size: 4" in text
    assert "flash_attn: sdpa" in text and "fa2" not in text
    assert "`flash_attn: sdpa` written: what `fa2` runs here" in out + err
    again = run_cli(["fix", *options, str(path)])
    assert again[0] == 0 and path.read_text() == text and "Fixed 0 problem(s)" in again[1] + again[2]


def test_with_flash_attn_lf019_still_holds_the_row_and_a_longer_row_is_only_said() -> None:
    """flash-attn in the job's environment: neat packing with fa2 takes one row per micro-batch (LF019), and a row
    4 times longer (which keeps the tokens per micro-batch) changes what the job trains on: said, not written."""
    plan = _plan(QWEN25_FA2, WITH_FLASH_ATTN)
    assert plan.best.packing and plan.best.attn == "fa2" and plan.best.micro == 1
    assert "cutoff_len" not in plan.changes and FA2_FALLS_BACK not in description(plan)
    assert "`cutoff_len: 48000` would keep 4 x 12000 tokens per micro-batch" in description(plan)
    assert "a change of what the job trains on, not applied" in description(plan)


def test_plain_packing_is_shown_and_never_applied(tmp_path: Path) -> None:
    """Neat packing under SDPA: plain packing's measured gain is in the fix's words (display only), and the file
    the fix writes packs neatly (samples never attend to each other unless the user sets `packing: true`)."""
    path = tmp_path / "train.yaml"
    shutil.copy(FA2_LORA, path)
    _, out, err = run_cli(["fix", "--write", "--unsafe-fixes", "--exit-zero", "--target", "h200", str(path)])
    text = path.read_text()
    assert "neat_packing: true" in text and "\npacking:" not in text
    lora = 1 / NEAT_WITHOUT_FA2["lora"]
    assert f"display only: `packing: true` ran {lora:.2f}x neat packing's speed at the same shape" in out + err
    assert "(H200, LoRA at cutoff 2048 and 4096; 1.09x at 1024; bench/planner/README.md)" in out + err
    assert "packing" not in _plan(path).changes


def test_neat_packing_costs_what_was_measured() -> None:
    """The 2026-12-05 H200 rows: 0.84x for LoRA (two jobs), 0.92x for a full fine-tune (bench/planner/README.md)."""
    assert round(NEAT_WITHOUT_FA2["lora"], 2) == 0.84 and round(NEAT_WITHOUT_FA2["full"], 2) == 0.92
    display = description(_plan(QWEN25_FA2))
    assert f"ran {1 / NEAT_WITHOUT_FA2['full']:.2f}x neat packing's speed" in display
    # the figure says where it was measured: a LoRA at cutoff 1024 measured 1.09x, not the 1.19x of 2048-4096
    assert "(H200, full fine-tuning at cutoff 2048; bench/planner/README.md)" in display


def _lf019(tmp_path: Path, requirements: str | None, *options: str, model: str | None = None) -> str:
    """LF019's lint output on a neat-packed fa2 LoRA at 4 rows per micro-batch, judged for `requirements`' pins
    (None: no requirement file) and `options`."""
    path = tmp_path / "train.yaml"
    text = FA2_LORA.read_text() + "neat_packing: true\nper_device_train_batch_size: 4\n"
    path.write_text(text.replace("meta-llama/Meta-Llama-3-8B-Instruct", model) if model else text)
    pins = tmp_path / "requirements.txt"
    pins.unlink(missing_ok=True)
    if requirements is not None:
        pins.write_text(requirements)
    _, out, _ = run_cli(["lint", "--select", "LF019", "--target", "h200", *options, str(path)])
    return out


def test_lf019_fires_only_where_a_release_judged_asserts(tmp_path: Path) -> None:
    """The assertion and the gemma4 / gpt-oss refusal came with LLaMA-Factory 0.9.5 (0.9.3 / 0.9.4 collators have
    neither): no LF019 for a job pinned to, or judged for, an older release; a range that allows 0.9.5 gets it,
    naming the release that asserts and those that do not."""
    flash = "flash-attn==2.8.3\n"
    assert "LF019" not in _lf019(tmp_path, "llamafactory==0.9.3\n" + flash)
    assert "LF019" not in _lf019(tmp_path, None, "--llamafactory-version", "0.9.4")
    assert "LF019" not in _lf019(tmp_path, "llamafactory>=0.9.3,<0.9.5\n" + flash)
    exact = _lf019(tmp_path, "llamafactory==0.9.5\n" + flash)
    assert "`AssertionError: bsz should be 1 for neat packing`" in exact and "under LLaMA-Factory" not in exact
    wider = _lf019(tmp_path, "llamafactory>=0.9.3\n" + flash)
    assert "(when flash-attn is installed) under LLaMA-Factory 0.9.5 (0.9.3 and 0.9.4, which " in wider
    assert "requirements.txt also allows, do not check)" in wider
    gemma4 = "google/gemma-4-12b-it"
    assert "LF019" not in _lf019(tmp_path, "llamafactory==0.9.4\n" + flash, model=gemma4)
    assert "on a gemma4 model" in _lf019(tmp_path, "llamafactory==0.9.5\n" + flash, model=gemma4)


def test_the_plan_holds_one_row_only_where_a_release_judged_asserts() -> None:
    """With flash-attn, neat packing with fa2 keeps one row per micro-batch where LLaMA-Factory 0.9.5 is judged
    (alone or in the project's range: the plan is written for every release it allows); judged for 0.9.4 alone,
    nothing asserts and the micro-batch stays as memory allows, with no word of LF019."""
    older = plan_for(
        load_job(
            QWEN25_FA2, Settings(target_name="h200", gpus=1, environment=WITH_FLASH_ATTN, llamafactory_version="0.9.4")
        )
    )
    assert older is not None and older.best.attn == "fa2" and older.best.micro == 4
    assert "LF019" not in description(older)
    allows = VersionRange("llamafactory", ">=0.9.3", "requirements.txt")
    # transformers 5 stated: of the range only 0.9.5 installs with it, so 0.9.4's refusal of neat packing (LF054)
    # does not keep the plan from packing
    node = Environment({**WITH_FLASH_ATTN.packages, "transformers": "==5.6.0"}, "node.txt")
    ranged = Settings(target_name="h200", gpus=1, environment=node, llamafactory_range=allows)
    plan = plan_for(load_job(QWEN25_FA2, ranged))
    assert plan is not None and plan.best.attn == "fa2" and plan.best.micro == 1


def test_the_micro_batch_advice_is_silenced_by_lf019_only_where_it_asserts(tmp_path: Path) -> None:
    """PF007 stays silent for neat packing with fa2 and flash-attn only where the release judged asserts (0.9.5)."""
    path = tmp_path / "train.yaml"
    path.write_text(
        FA2_LORA.read_text() + "neat_packing: true\ncutoff_len: 1024\nper_device_train_batch_size: 1\n"
        "gradient_accumulation_steps: 8\n"
    )
    (tmp_path / "requirements.txt").write_text("llamafactory==0.9.4\nflash-attn==2.8.3\n")
    _, out, _ = run_cli(["lint", "--select", "PF007", "--target", "h200", str(path)])
    assert "PF007" in out


def test_lf019_says_the_environment_it_is_judged_for(tmp_path: Path) -> None:
    path = tmp_path / "train.yaml"
    path.write_text(FA2_LORA.read_text() + "neat_packing: true\nper_device_train_batch_size: 4\n")
    node = tmp_path / "node.txt"
    node.write_text("llamafactory==0.9.5\nflash-attn==2.8.3\n")
    _, bare, _ = run_cli(["lint", "--select", "LF019", "--target", "h200", str(path)])
    _, flash, _ = run_cli(["lint", "--select", "LF019", "--target", "h200", "--environment", str(node), str(path)])
    assert "LF019" in bare and "LF019" in flash  # a warning either way: true wherever flash-attn is installed
    assert "the assumed environment has no flash-attn, where `fa2` falls back to SDPA" in bare
    assert "falls back" not in flash


def test_the_micro_batch_advice_is_silenced_by_lf019_only_with_flash_attn(tmp_path: Path) -> None:
    """PF007 (a small micro-batch) stays silent for neat packing with fa2 only where fa2 runs and asserts."""
    path = tmp_path / "train.yaml"
    path.write_text(
        FA2_LORA.read_text() + "neat_packing: true\ncutoff_len: 1024\nper_device_train_batch_size: 1\n"
        "gradient_accumulation_steps: 8\n"
    )
    node = tmp_path / "node.txt"
    node.write_text("llamafactory==0.9.5\nflash-attn==2.8.3\n")
    _, bare, _ = run_cli(["lint", "--select", "PF007", "--target", "h200", str(path)])
    _, flash, _ = run_cli(["lint", "--select", "PF007", "--target", "h200", "--environment", str(node), str(path)])
    assert "PF007" in bare and "PF007" not in flash


def test_stochastic_rounding_by_model_size() -> None:
    """Below 6B parameters stochastic rounding ran slower (Qwen3-4B: 0.72x bf16 + AdamW): a note on the H200, where
    AdamW fits, and the plan where nothing faster fits (an L40S); at 8B it ran 1.18-1.21x the 8-bit AdamW plan:
    planned."""
    small = _plan(EXAMPLES / "qwen3_full_sft.yaml", WITH_TORCHAO)
    assert small.best.optim != space.SR_OPTIM
    assert any(
        n.startswith("stochastic rounding (pure bf16 with torchao's 8-bit AdamW) not planned") for n in small.notes
    )
    tight = _plan(EXAMPLES / "qwen3_full_sft.yaml", WITH_TORCHAO, target="l40s")
    assert tight.best.optim == space.SR_OPTIM and "planned for memory: nothing faster fits" in description(tight)
    large = _plan(EXAMPLES / "llama3_full_sft_fp16.yaml", WITH_TORCHAO)
    assert large.best.optim == space.SR_OPTIM and not any("stochastic rounding" in r for r in large.remarks)


def test_the_estimate_holds_the_neat_mask_where_fa2_runs_sdpa(tmp_path: Path) -> None:
    """Neat packing with `fa2` and no flash-attn runs SDPA with its 4D block mask (b x s x s): the memory estimate,
    which the plan fits by, counts it there and not where flash-attn runs the varlen path."""
    path = tmp_path / "train.yaml"
    path.write_text(FA2_LORA.read_text() + "neat_packing: true\ncutoff_len: 8192\nper_device_train_batch_size: 4\n")

    def mask(environment: Environment | None) -> list[str]:
        est = load_job(path, Settings(target_name="h200", gpus=1, environment=environment)).estimate(1)
        assert est is not None
        return [c.name for c in est.components if "mask" in c.name]

    assert mask(None) == ["neat_packing mask"] and mask(WITH_FLASH_ATTN) == []


def test_a_users_neat_packing_pays_the_mask_under_sdpa(tmp_path: Path) -> None:
    """The user's own neat packing with fa2 at cutoff 8192 and flash-attn in the environment: SDPA at two rows pays
    neat packing's block mask (0.84x), so the plan keeps fa2 at one row (LF019) rather than leaving fa2 for SDPA."""
    path = tmp_path / "train.yaml"
    path.write_text(
        FA2_LORA.read_text() + "neat_packing: true\ncutoff_len: 8192\nper_device_train_batch_size: 1\n"
        "gradient_accumulation_steps: 2\n"
    )
    best = _plan(path, WITH_FLASH_ATTN).best
    assert best.attn == "fa2" and best.micro == 1
