"""Launch scripts as the shell reads them: every simple command found in one tokenizer pass (issue 26 items 1,
5, 8, 14, 15) and every way of launching LLaMA-Factory's training mapped to the same arguments (issue 24)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from rule_cases import cfgopt_process
from work_counter import assert_linear

from cfgopt.loaders import shell
from cfgopt.loaders.launch import find_commands
from cfgopt.text.document import Document

ARGS = "--stage sft --model_name_or_path m --do_train --dataset d --template llama3 --output_dir out"


def sources(text: str):
    return find_commands(Document(path=Path("run.sh"), text=text))


def cli(*args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    return cfgopt_process(*args, cwd=cwd, timeout=timeout)


# ---------------------------------------------------------------- item 1: words that hold `)`


@pytest.mark.parametrize(
    "word",
    [
        "$((RANDOM % 100))",
        "$(( (RANDOM + 1) * 2 ))",
        "$( (echo 1) )",
        "$(case $X in a) echo 1;; (b) echo 2;; esac)",
        '"$(case $X in a|b) echo 1 ;; esac)"',
        "$(echo $((1 + 2)))",
    ],
)
def test_words_holding_parentheses_are_one_word(word: str) -> None:
    text = f"llamafactory-cli train --model_name_or_path m --seed {word} --flash_attn Fa --bf16 True\n"
    (src,) = sources(text)
    seed = src.root.get("seed")
    assert text[seed.node.start : seed.node.end] == word and seed.node.raw is None
    assert src.data["flash_attn"] == "Fa" and src.data["bf16"] is True  # what follows is still read


def test_arithmetic_word_survives_fix_write(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text(f"llamafactory-cli train {ARGS} --seed $((RANDOM % 100)) --flash_attn Fa --compute_type bf16\n")
    run = cli("fix", "--write", "--unsafe-fixes", "--select", "LF", "run.sh", cwd=tmp_path)  # not the speed plan
    assert run.returncode == 0, run.stdout + run.stderr
    assert (
        script.read_text() == f"llamafactory-cli train {ARGS} --seed $((RANDOM % 100)) --flash_attn sdpa --bf16 True\n"
    )
    if shutil.which("bash"):
        assert subprocess.run(["bash", "-n", str(script)], timeout=30).returncode == 0


# ---------------------------------------------------------------- item 5: sweep scripts are linear


def sweep(commands: int) -> str:
    lines = ["#!/bin/bash", "export CUDA_VISIBLE_DEVICES=0,1"]
    for i in range(commands):
        lines += [
            f"LR=1e-{i % 5 + 3}",
            "llamafactory-cli train \\",
            f"    --model_name_or_path m{i} --stage sft --do_train --finetuning_type lora \\",
            f"    --template llama3 --dataset alpaca_en_demo --output_dir out/{i} \\",
            "    --learning_rate $LR --flash_attn Fa --compute_type bf16",
        ]
    return "\n".join(lines) + "\n"


def _flash_attn_edits(text: str) -> list:
    from cfgopt.text.diagnostics import Edit

    edits = []
    for at in range(len(text)):
        at = text.find("Fa", at)
        if at == -1:
            break
        edits.append(Edit(at, at + 2, "sdpa"))
    return edits


def test_sweep_scan_and_damage_check_are_linear() -> None:
    """The tokenizer and the damage check over 1,000 commands and 2,000 edits (were quadratic): right, and
    their step count doubles, no more, when the sweep doubles (its speed: bench/sweep)."""
    from cfgopt.lint.fix_check import damage

    text = sweep(1000)
    assert len(shell.scan(text + " ").commands) == 1 + 2 * 1000
    assert damage(Path("run.sh"), text, _flash_attn_edits(text), "script")[1] is None
    assert_linear(lambda n: shell.scan(sweep(n) + " "), 100)
    assert_linear(lambda n: damage(Path("run.sh"), sweep(n), _flash_attn_edits(sweep(n)), "script"), 100)


def test_sweep_lint_and_fix_end_in_seconds(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    # the 600-line sweep (its speed is bench/sweep's; here only that it ends and fixes every line)
    script.write_text(sweep(600))
    run = cli("lint", "run.sh", cwd=tmp_path, timeout=300)  # a hang bound, not a speed target
    assert run.returncode == 1 and "1200 error(s)" in run.stdout + run.stderr
    run = cli("fix", "--write", "--unsafe-fixes", "run.sh", cwd=tmp_path, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert script.read_text().count("--flash_attn sdpa --bf16 True") == 600


# ---------------------------------------------------------------- item 8: no quadratic regex


def test_many_assignments_are_read_in_linear_time(tmp_path: Path) -> None:
    """The command regex this replaced retried every line of a run of `VAR=value` lines to its end (quadratic:
    over 10 s for this text); the tokenizer reads each character once: its step count doubles with the text."""
    text = assignments(12000)
    assert len(text) > 200_000
    (src,) = sources(text)
    assert src.command["env"] == {"A": "1"}
    assert_linear(lambda n: sources(assignments(n)), 300)
    (tmp_path / "run.sh").write_text(text)
    assert cli("lint", "run.sh", cwd=tmp_path, timeout=300).returncode == 1


def assignments(lines: int) -> str:
    """`lines` lines of `VAR=value`, a near miss, a third as many `A=1` prefixes, then the command."""
    return (
        "".join(f"VAR_{i}=value_{i}\n" for i in range(lines))
        + "llamafactory-clix train\n"
        + "A=1 " * (lines // 3)
        + "llamafactory-cli train --bf16 x\n"
    )


# ---------------------------------------------------------------- item 14: wherever a command starts


@pytest.mark.parametrize(
    "line",
    [
        "    llamafactory-cli train {args}",
        "for s in 1 2; do llamafactory-cli train {args}; done",
        "nohup llamafactory-cli train {args} > log 2>&1 &",
        "time llamafactory-cli train {args}",
        "time -p nohup env -u X A=1 llamafactory-cli train {args}",
        "if true; then llamafactory-cli train {args}; else exit 1; fi",
        "{{ llamafactory-cli train {args}; }}",
        "( llamafactory-cli train {args} )",
        "! llamafactory-cli train {args}",
        "echo start && exec llamafactory-cli train {args} | tee log",
        "timeout 10h nice -n 5 llamafactory-cli train {args}",
        "sudo -E llamafactory-cli train {args}",
        "case $1 in sft) llamafactory-cli train {args} ;; esac",
        "train() {{ llamafactory-cli train {args}; }}",
    ],
)
def test_commands_are_found_wherever_they_start(line: str, tmp_path: Path) -> None:
    text = "#!/bin/bash\n" + line.format(args=f"{ARGS} --flash_attn Fa") + "\n"
    (src,) = sources(text)
    assert src.data["flash_attn"] == "Fa"
    (tmp_path / "run.sh").write_text(text)
    run = cli("lint", "--select", "LF003", "run.sh", cwd=tmp_path)
    assert run.returncode == 1 and "LF003" in run.stdout


def test_text_that_is_not_a_command_is_not_read() -> None:
    text = (
        "# llamafactory-cli train --flash_attn Fa\n"
        "cat > run2.sh <<EOF\nllamafactory-cli train --flash_attn Fb\nEOF\n"
        "echo 'llamafactory-cli train --flash_attn Fc'\n"
        "CMDS=(llamafactory-cli train --flash_attn Fd)\n"
        "echo llamafactory-cli train --flash_attn Fe\n"
        "case $x in llamafactory-cli) echo no ;; esac\n"
    )
    assert sources(text) == []


# ---------------------------------------------------------------- item 15: expansions are open, not missing


@pytest.mark.parametrize(
    "args", ['"$1"', "$CONFIG", '"$@"', "$EXTRA_ARGS", "--template llama3 $EXTRA", "--$KEY m", '"${ARGS[@]}"']
)
def test_expansions_may_carry_any_argument(args: str, tmp_path: Path) -> None:
    (src,) = sources(f"llamafactory-cli train {args}\n")
    assert src.command["open"] is True
    (tmp_path / "run.sh").write_text(f"llamafactory-cli train {args} --flash_attn Fa\n")
    run = cli("lint", "run.sh", cwd=tmp_path)
    assert "LF032" not in run.stdout and "LF003" in run.stdout  # the literal keys are still checked


def test_an_expansion_as_a_value_is_one_unknown_value() -> None:
    (src,) = sources('llamafactory-cli train --template llama3 --learning_rate $LR --output_dir "$OUT"\n')
    assert src.command["open"] is False and src.root.get("learning_rate").node.raw is None


# ---------------------------------------------------------------- issue 24: launch shapes


@pytest.mark.parametrize(
    ("line", "launcher", "gpus"),
    [
        ("llamafactory-cli train {args}", "llamafactory-cli", None),
        ("lmf train {args}", "lmf", None),
        ("python -u src/train.py {args}", "python src/train.py", None),
        ("python3 src/train_bash.py {args}", "python src/train_bash.py", None),
        ("python -m llamafactory.cli train {args}", "python -m llamafactory.cli", None),
        ("python -m llamafactory.launcher {args}", "python -m llamafactory.launcher", None),
        ("deepspeed --num_gpus 4 --master_port 29500 src/train.py {args}", "deepspeed src/train.py", 4),
        ("deepspeed --include localhost:0,1 src/train.py {args}", "deepspeed src/train.py", 2),
        ("torchrun --nproc_per_node 8 --nnodes 1 src/train.py {args}", "torchrun src/train.py", 8),
        ("torchrun --nproc-per-node=2 src/llamafactory/launcher.py {args}", "torchrun src/llamafactory/launcher.py", 2),
        ("torchrun src/train.py {args}", "torchrun src/train.py", 1),
        (
            "python -m torch.distributed.run --nproc_per_node 3 src/train.py {args}",
            "python -m torch.distributed.run src/train.py",
            3,
        ),
        (
            "accelerate launch --num_processes 2 --config_file a.yaml src/train.py {args}",
            "accelerate launch src/train.py",
            2,
        ),
        ("accelerate launch --config_file a.yaml src/train.py {args}", "accelerate launch src/train.py", None),
        # 4 processes per node x 2 nodes
        ("FORCE_TORCHRUN=1 NNODES=2 NPROC_PER_NODE=4 llamafactory-cli train {args}", "llamafactory-cli", 8),
        ("CUDA_VISIBLE_DEVICES=0,1,2 llamafactory-cli train {args}", "llamafactory-cli", 3),
        ("HIP_VISIBLE_DEVICES=0 python src/train.py {args}", "python src/train.py", 1),
        (
            "python -m torch.distributed.launch --use_env --nproc_per_node 2 src/train.py {args}",
            "python -m torch.distributed.launch src/train.py",
            2,
        ),
        ("deepspeed --some_new_flag src/train.py {args}", "deepspeed src/train.py", None),
        ("torchrun $DIST_ARGS src/train.py {args}", "torchrun src/train.py", None),
        ("torchrun $DIST_ARGS --nproc_per_node 4 src/train.py {args}", "torchrun src/train.py", 4),
    ],
)
def test_launch_shapes_map_to_the_training_arguments(line: str, launcher: str, gpus: int | None) -> None:
    (src,) = sources(line.format(args=f"{ARGS} --flash_attn Fa") + "\n")
    assert src.command["launcher"] == launcher and src.command["subcommand"] == "train"
    assert src.data == {
        "stage": "sft",
        "model_name_or_path": "m",
        "do_train": True,
        "dataset": "d",
        "template": "llama3",
        "output_dir": "out",
        "flash_attn": "Fa",
    }
    found = src.command["launcher_gpus"]
    assert (found and found[0]) == gpus


def test_gpu_count_follows_exports_in_script_order() -> None:
    text = (
        "export CUDA_VISIBLE_DEVICES=0,1,2,3\nllamafactory-cli train --template llama3\n"
        "CUDA_VISIBLE_DEVICES=0\nllamafactory-cli train --template llama3\n"
        "unset CUDA_VISIBLE_DEVICES\nllamafactory-cli train --template llama3\n"
        "if true; then export HIP_VISIBLE_DEVICES=0,1; fi\nllamafactory-cli train --template llama3\n"
    )
    first, second, third, fourth = sources(text)
    assert fourth.command["launcher_gpus"][0] == 2
    assert first.command["launcher_gpus"] == (4, "`CUDA_VISIBLE_DEVICES=0,1,2,3` (line 1)")
    assert second.command["launcher_gpus"][0] == 1  # an exported variable assigned again stays exported
    assert third.command["launcher_gpus"] is None


def test_launcher_options_are_not_llamafactory_keys(tmp_path: Path) -> None:
    (tmp_path / "run.sh").write_text(
        f"deepspeed --num_gpus 2 --master_port 29500 --hostfile hf src/train.py {ARGS}\n"
        f"accelerate launch --multi_gpu --mixed_precision bf16 src/train.py {ARGS}\n"
    )
    run = cli("lint", "--select", "LF", "run.sh", cwd=tmp_path)  # the keys; not the speed advice
    assert run.returncode == 0, run.stdout


def test_other_projects_train_scripts_are_not_read() -> None:
    text = (
        "python src/train.py --model_name_or_path m --dataset_name d --bf16 x\n"
        "torchrun --nproc_per_node 2 train.py --flash_attn Fa\n"
        "python -c 'import sys' src/train.py --stage sft\n"
    )
    assert sources(text) == []


def test_yaml_launches_are_linked(tmp_path: Path) -> None:
    (tmp_path / "cfg.yaml").write_text(
        "model_name_or_path: m\nstage: sft\ndo_train: true\nfinetuning_type: lora\ndataset: d\ntemplate: llama3\n"
        "output_dir: out\nflash_attn: Fa\n"
    )
    (tmp_path / "run.sh").write_text("torchrun --nproc_per_node 2 src/train.py cfg.yaml\n")
    run = cli("lint", "--select", "LF003", "run.sh", cwd=tmp_path)
    assert "cfg.yaml:8:13: error LF003" in run.stdout


def test_the_job_uses_the_launchers_gpu_count_unless_gpus_is_given() -> None:
    from cfgopt.job.job import Job
    from cfgopt.job.settings import Settings

    (src,) = sources("deepspeed --num_gpus 4 src/train.py --stage sft --model_name_or_path m\n")
    assert Job(src, Settings()).hardware(1)[1:3] == (4, True)
    assert Job(src, Settings(gpus=2)).hardware(1)[1:3] == (2, True)
    (src,) = sources("llamafactory-cli train --model_name_or_path m\n")
    assert Job(src, Settings()).hardware(1)[1:3] == (1, False)


def test_mixed_precision_set_by_the_launcher_is_mixed_precision(tmp_path: Path) -> None:
    """`accelerate launch --mixed_precision bf16` (or ACCELERATE_MIXED_PRECISION) makes the HF Trainer autocast
    without `bf16: true` (transformers 5.6 training_args.py L1580): no PF002 there, PF002 where nothing sets it."""
    args = "src/train.py --stage sft --model_name_or_path m --do_train --dataset d --template llama3 --output_dir o"
    (tmp_path / "run.sh").write_text(
        f"accelerate launch --multi_gpu --mixed_precision bf16 {args}\n"
        f"ACCELERATE_MIXED_PRECISION=fp16 accelerate launch {args}\n"
        f"accelerate launch --config_file acc.yaml {args}\n"
        f"accelerate launch {args}\n"
    )
    run = cli("lint", "--select", "PF002", "--format", "concise", "run.sh", cwd=tmp_path)
    assert [line.split(":")[1] for line in run.stdout.splitlines() if "PF002" in line] == ["4"], run.stdout
