"""`Rule.triggers` only saves time: a rule skipped because none of its trigger keys is in a file must have had
nothing to say about it. Every rule fixture, the seed and clean fixtures, the wild set and (when present) the
real-config corpus are linted with every rule selected, on two targets, with and without the skipping: the
findings must be the same."""

from __future__ import annotations

import json
from itertools import product
from pathlib import Path

import pytest
from oracle_harness import CORPUS
from rule_cases import ROOT, job_folder
from sampling import default_sample, full, params

from cfgopt.lint.engine import build_project
from cfgopt.lint.project_config import CommandLine, Resolver
from cfgopt.rules import all_rules

FIXTURES = ROOT / "fixtures"
WILD = ROOT / "tests" / "data" / "wild"


def _folders() -> list[Path]:
    cases = sorted(p for p in (FIXTURES / "rules").glob("*/*") if p.is_dir())
    wild = sorted(p for p in WILD.iterdir() if p.is_dir())
    return [*cases, FIXTURES / "seed", FIXTURES / "clean", *wild]


def _findings(folder: Path, target: str, skip: bool) -> list[tuple[str, int, int, str, str]]:
    resolver = Resolver(CommandLine(target=target, select=["ALL"]))
    project = build_project([folder], resolver)
    project.skip_untriggered = skip
    return [(str(d.path), d.start, d.end, d.code, d.message) for d in project.diagnostics()]


@pytest.mark.parametrize("target", params(["mi300x", "h100"], 1))  # one target by default, both with --full
def test_triggers_never_hide_a_finding(target: str) -> None:
    different = []
    for folder in _folders():
        with job_folder(folder) as where:  # a rule case with its shared data in place
            with_skip, without = _findings(where, target, True), _findings(where, target, False)
        if with_skip != without:
            missing = sorted(set(without) - set(with_skip))
            different.append(f"{folder.relative_to(ROOT)}: {missing[:3]}")
    assert not different, "\n".join(different)


def test_triggers_never_hide_a_finding_in_the_corpus() -> None:
    if not CORPUS.is_dir():
        pytest.skip("needs the real-config corpus: shared/corpus beside the checkout, or CFGOPT_CORPUS=<folder>")
    for target in ("mi300x", "h100"):
        assert _findings(CORPUS, target, True) == _findings(CORPUS, target, False)


def test_triggers_are_top_level_key_names_or_a_key_with_its_text() -> None:
    for rule in all_rules():
        if rule.triggers is not None:
            keys = [k.partition("=")[0] for k in rule.triggers]
            assert rule.triggers and all(isinstance(k, str) and k and "." not in k for k in keys), rule.code


# Mutated jobs for the rules whose triggers are one key of the file they check (PF005 `neat_packing`, LF050 `fp16`,
# PF050 `deepspeed`, PF051 `zero_optimization`) or one value of it (PF004 `flash_attn=disabled`, LF006
# `flash_attn=fa3`, LF017 `stage=ppo`): each key present with a value that makes its rule fire, present with one
# that does not, or absent, in a YAML, the launch line and its DeepSpeed JSON.
MODELS = ("meta-llama/Meta-Llama-3-8B-Instruct", "Qwen/Qwen2.5-7B-Instruct")
PRECISIONS = ({}, {"bf16": "true"}, {"fp16": "true"}, {"fp16": "false"}, {"fp16": "true", "bf16": "true"})
ATTENTION = ({}, {"flash_attn": "disabled"}, {"flash_attn": "sdpa"}, {"flash_attn": "fa2"}, {"flash_attn": "fa3"})
STAGES = ("sft", "ppo")
PACKING = ({}, {"neat_packing": "true"}, {"neat_packing": "false", "packing": "true"})
ZERO = (None, {"stage": 3, "offload_optimizer": {"device": "cpu"}}, {"stage": 3}, {"stage": 2}, "absent")
METHODS = ("lora", "full")
WHERE = (("h100", 1), (None, None), ("mi300x", 8), ("h100", None))
FLASH_ATTN_INSTALLED = ("", 'environment = { llamafactory = "0.9.5", flash-attn = "2.7.4" }\n')
NARROWED = {"PF004", "PF005", "LF050", "PF050", "PF051", "LF006", "LF017"}


def _mutants() -> list[tuple]:
    grid = product(
        MODELS, PRECISIONS, ATTENTION, PACKING, ZERO, METHODS, range(len(WHERE)), FLASH_ATTN_INSTALLED, STAGES
    )
    return default_sample(list(grid), 40 if not full() else 160, key=repr)


def _write_job(folder: Path, mutant: tuple) -> tuple[str | None, int | None]:
    model, precision, attention, packing, zero, method, where, environment, stage = mutant
    keys = {"model_name_or_path": model, "stage": stage, "do_train": "true", "finetuning_type": method}
    keys |= {"dataset": "alpaca_en_demo", "template": "llama3", "output_dir": "out", "cutoff_len": "2048"}
    keys |= {**precision, **attention, **packing}
    if zero is not None:
        keys["deepspeed"] = "ds.json"
        block = {} if zero == "absent" else {"zero_optimization": zero}
        folder.joinpath("ds.json").write_text(json.dumps({**block, "train_micro_batch_size_per_gpu": "auto"}))
    folder.joinpath("train.yaml").write_text("".join(f"{k}: {v}\n" for k, v in keys.items()))
    flags = " ".join(f"--{k} {v}" for k, v in keys.items())
    folder.joinpath("run.sh").write_text(f"llamafactory-cli train {flags}\nllamafactory-cli train train.yaml\n")
    folder.joinpath("cfgopt.toml").write_text(environment)
    return WHERE[where]


def _mutant_findings(folder: Path, target: str | None, gpus: int | None, skip: bool) -> list[tuple]:
    project = build_project([folder], Resolver(CommandLine(target=target, gpus=gpus, select=["ALL"])))
    project.skip_untriggered = skip
    return [(str(d.path), d.start, d.end, d.code, d.message) for d in project.diagnostics()]


def test_narrowed_triggers_never_hide_a_finding_in_mutated_jobs(tmp_path: Path) -> None:
    fired: set[str] = set()
    for number, mutant in enumerate(_mutants()):
        folder = tmp_path / f"job{number}"
        folder.mkdir()
        target, gpus = _write_job(folder, mutant)
        without = _mutant_findings(folder, target, gpus, False)
        assert _mutant_findings(folder, target, gpus, True) == without, mutant
        fired |= {finding[3] for finding in without} & NARROWED
    assert fired == NARROWED  # each narrowed rule reported in some job: the sample tests its key
