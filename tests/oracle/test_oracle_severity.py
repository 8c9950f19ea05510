"""Oracle group: every `error` in a rule's fixtures is a file the real tool rejects.

An error means the real tool fails. For each `file:line:col CODE error` line of fixtures/rules/*/*/expected.txt
the file is judged by the real tools (tests/support/oracle_harness.py: LLaMA-Factory 0.9.5 / transformers 5.6.0 /
DeepSpeed 0.19.8, with the case's `--target`): YAML through `get_train_args` + the model-load checks, following
its `deepspeed:` file; JSON through the HF path with the case's YAML as its consumer; `llamafactory-cli`
command lines through argparse. Where the failure happens later than a CPU can reach (model load, the Trainer,
`deepspeed.initialize`, a multi-GPU launch), `CITED` names the source line that raises instead; the test checks
that those cases really are out of the CPU oracle's reach, so the list cannot hide a wrong severity.
"""

from __future__ import annotations

import contextlib
import io
import shlex
import warnings
from pathlib import Path

import pytest
from rule_cases import CASES_DIR, all_cases, case_args

from cfgopt.text.requirements.files import is_requirement_file, is_requirements_txt

pytest.importorskip("llamafactory")
pytest.importorskip("deepspeed")

import oracle_harness as H

# case/file -> the line that raises in the real tool, where the CPU oracle cannot get there.
LF055_BASH = (
    "bash reads a `\\` before a CR as a quoted CR, not a line continuation: the launch gets a `\\r` argument "
    "and its flags run as commands (the CLI oracle reads the script as the user sees it); "
    "tests/loaders/test_launch_line_endings.py runs bash with a stand-in llamafactory-cli, then llamafactory 0.9.5's "
    "`get_train_args` on what bash passes"
)
GEMMA2_AUTO_T4 = (
    "llamafactory 0.9.5 model/model_utils/attention.py L46-53 turns `auto` on Gemma 2 into fa2 where flash-attn is "
    "installed; then flash_api.cpp `mha_fwd` refuses a T4 at the first forward, as for LF049/t4-flash-attn (needs a "
    "T4 with flash-attn installed)"
)
CITED: dict[str, str] = {
    "DS011/with-consumer/ds.json": "accelerate 1.11.0 utils/dataclasses.py:1320-1336 `DeepSpeedPlugin.fill_match` "
    'raises for an "auto" the Trainer does not fill, at `trainer.train()`',
    "DS016/nvme-no-path/ds.json": "deepspeed 0.19.8 runtime/swap_tensor/partitioned_param_swapper.py:86 "
    "`os.path.join(None, ...)`: TypeError at `deepspeed.initialize` / `zero.Init`",
    "LF002/quoted-values/train.yaml": "a quoted number reaches the optimizer / scheduler as a str: TypeError at "
    "first use (https://github.com/hiyouga/LlamaFactory/issues/4149)",
    "DS025/typos/ds.json": "deepspeed 0.19.8 runtime/engine.py `_configure_basic_optimizer`: "
    "`adam_optimizer(model_parameters, **optimizer_parameters)` (TypeError on `betaz`) and `_scheduler_from_config`: "
    "`assert hasattr(torch.optim.lr_scheduler, name)` (WarmupLRR), at `deepspeed.initialize` "
    "(tests/knowledge/test_ds_optimizers.py holds the snapshot to the real classes)",
    "DS025/zero-018/onebit.json": "deepspeed 0.18.9 runtime/engine.py `_configure_basic_optimizer`: "
    "`assert not self.zero_optimization(), '1bit-Adam is not compatible with ZeRO'` at `deepspeed.initialize` (the "
    "CPU oracle runs 0.19.8, which has no 1-bit optimizers)",
    "DS025/muon-017/ds.json": "deepspeed 0.17.6 runtime/engine.py `_configure_basic_optimizer`: `assert zero_stage <= "
    "ZeroStageEnum.gradients, 'Muon optimizer is not yet compatible with ZeRO Stage 3'` at `deepspeed.initialize`",
    "DS025/typos/type.json": "deepspeed 0.19.8 runtime/engine.py `_configure_basic_optimizer`: "
    "`getattr(torch.optim, 'AdamWW')` raises AttributeError at `deepspeed.initialize`",
    "LF037/chatglm/train.yaml": "peft tuners/tuners_utils.py `inject_adapter`: `Target modules {...} not found in "
    "the base model` at model load (needs the ChatGLM weights)",
    "LF037/local-config/train.yaml": "peft tuners/tuners_utils.py `inject_adapter`: `Target modules {...} not found "
    "in the base model` at model load (the model folder's config.json says `model_type: chatglm`; tests/"
    "test_lora_target.py runs PEFT on a real model for the same error)",
    "LF038/yml-090/train.yml": "llamafactory 0.9.0 hparams/parser.py `_parse_args`: only a name ending in `.yaml` "
    "is read as a config, so `train.yml` reaches argparse and `Some specified arguments are not used` is raised "
    "(the CPU oracle runs 0.9.5, which reads `.yml` too; confirmed with 0.9.0 / transformers 4.45.0: exit 2)",
    "LF042/release-091/train.yaml": "llamafactory 0.9.1 hparams/parser.py `get_train_args`: `Please specify which "
    "template to use.` (the CPU oracle runs 0.9.5, which picks a default template; confirmed with 0.9.1)",
    "LF042/launch-yaml-with-template/notemplate.yaml": "llamafactory 0.9.1 hparams/parser.py `get_train_args`: "
    "`Please specify which template to use.` (as LF042/release-091: the oracle runs 0.9.5)",
    "LF002/integral-floats/train.yaml": "an integral float passes `parse_dict` unconverted and reaches code that "
    "needs an int: `[pad_token_id] * pad_length` when packing (llamafactory 0.9.5 data/processor/supervised.py "
    "L218-220), PEFT's LoRA layers, the Trainer's DataLoader and loop, after tokenisation and model load "
    "(tests/oracle/test_integral_floats.py raises each with the real library)",
    "LF002/pyyaml-float-093/train.yaml": "llamafactory 0.9.3 hparams/parser.py L65 reads the YAML with "
    "`yaml.safe_load`, for which `1e-4` is the string '1e-4'; `parse_dict` passes it on and the optimizer's "
    "`0.0 <= lr` raises TypeError at Trainer creation (LLaMA-Factory #4149; the CPU oracle runs 0.9.5, which reads "
    "the file with OmegaConf: a float)",
    "LF055/continuation-cut/train.sh": LF055_BASH,
    "LF055/heredoc-no-fix/train.sh": LF055_BASH,
    "LF054/pinned-transformers/train.yaml": "llamafactory 0.9.4 hparams/parser.py L359-360 (`get_train_args`): "
    "`Neat packing is incompatible with transformers>=4.53.0.` (the CPU oracle runs 0.9.5, which has no such check)",
    "LF043/release-094/train.yaml": "llamafactory 0.9.4 hparams/model_args.py `__post_init__`: `split_special_tokens` "
    "is only supported for slow tokenizers (the CPU oracle runs 0.9.5, which dropped the check; confirmed with 0.9.4)",
    "LF011/quant/bits.yaml": "llamafactory 0.9.5 model/model_utils/quantization.py L167-181: bitsandbytes takes "
    "4 or 8 bits only, ValueError at model load",
    "LF012/badam-distributed/train.yaml": "llamafactory 0.9.5 hparams/parser.py L387-401: ratio-based BAdam raises "
    "in a distributed launch (the oracle runs one process)",
    "LF025/shift-attn/train.yaml": "llamafactory 0.9.5 model/model_utils/longlora.py L352-353: "
    "`check_version('transformers>=4.45.0,<4.48.0', mandatory=True)` at model load",
    "LF030/fsdp/train.yaml": "transformers 5.6.0 trainer.py L451-455: `--fsdp` with `--deepspeed` raises when the "
    "Trainer is built (needs a DeepSpeed launch: torchrun + DeepSpeed's shm_comm op, which this CPU host cannot build)",
    "LF049/t4-flash-attn/train.yaml": "Dao-AILab/flash-attention csrc/flash_attn/flash_api.cpp `mha_fwd`: "
    '`TORCH_CHECK(is_sm90 || is_sm8x, "FlashAttention only supports Ampere GPUs or newer.")` at the first forward '
    "(needs a T4 with flash-attn installed; transformers 5.6.0 checks no capability for FA2, so the load passes)",
    "LF049/gemma2-auto-t4/train.yaml": GEMMA2_AUTO_T4,
    "LF049/gemma2-auto-t4/auto.yaml": GEMMA2_AUTO_T4,
    "LF049/rocm-cuda-wheel/train.yaml": "transformers 5.6.0 modeling_utils.py L1913-1915 "
    "`lazy_import_flash_attention` at model load imports flash_attn, whose CUDA extension does not load with ROCm "
    "torch (needs an AMD GPU; tests/oracle/test_oracle_fa2_build.py runs LLaMA-Factory 0.9.5 and transformers to "
    "that ImportError with the extension absent)",
    "ENV005/conflicts/requirements.txt": "pip's resolver (no CPU oracle judges a requirement file): `pip install "
    "--dry-run datasets==3.5.0 tqdm==4.65.2` stops with ResolutionImpossible (pip 23.2); each pair comes from its "
    "release's PyPI metadata, cfgopt/knowledge/schemas/requirement-metadata.json",
    "LF051/zero3/awq-local.yaml": "llamafactory 0.9.5 model/model_utils/quantization.py L97-101: `DeepSpeed ZeRO-3 "
    "or FSDP is incompatible with PTQ-quantized models.` at model load (tests/rules/test_quantized_zero3.py runs "
    "the real `configure_quantization` with ZeRO-3 on)",
    "LF051/release-093/awq-local.yaml": "llamafactory 0.9.3 model/model_utils/quantization.py L93-94: every PTQ "
    "method refused under ZeRO-3 at model load (the CPU oracle runs 0.9.5)",
    "LF051/release-093/fp8-local.yaml": "llamafactory 0.9.3 model/model_utils/quantization.py L93-94: FP8 refused "
    "too (0.9.4 added the FP8 / MXFP4 exemption; the CPU oracle runs 0.9.5)",
    "LF003/report-to/list.yaml": "transformers 5.6.0 integrations/integration_utils.py L2671-2674 "
    "`get_reporting_integration_callbacks` refuses `tensorbord` when the Trainer is built (trainer.py L550), after "
    "data and model loading (tests/rules/test_report_to.py runs that check on every value)",
    "LF003/report-to/none-string.yaml": "transformers 5.6.0 integrations/integration_utils.py L2671-2674 "
    "`get_reporting_integration_callbacks` refuses the string `None` when the Trainer is built (trainer.py L550), "
    "after data and model loading (tests/rules/test_report_to.py runs that check on every value)",
    "LF003/report-to/null.yaml": "transformers 5.6.0 integrations/integration_utils.py L2671-2674 "
    "`get_reporting_integration_callbacks` refuses `[None]` (transformers 5 turns a null into it) when the Trainer "
    "is built (trainer.py L550), after data and model loading (tests/rules/test_report_to.py runs that check on "
    "every value)",
    "LF003/report-to/off.yaml": "transformers 5.6.0 integrations/integration_utils.py L2671-2674 "
    "`get_reporting_integration_callbacks` refuses `False` when the Trainer is built (trainer.py L550), after "
    "data and model loading (tests/rules/test_report_to.py runs that check on every value)",
    "LF003/report-to/train.yaml": "transformers 5.6.0 integrations/integration_utils.py L2671-2674 "
    "`get_reporting_integration_callbacks` refuses `tensorbord` when the Trainer is built (trainer.py L550), after "
    "data and model loading (tests/rules/test_report_to.py runs that check on every value)",
    "LF048/empty/train.yaml": "llamafactory 0.9.5 data/parser.py L125-126 `Undefined dataset missing` and datasets "
    '4.0.0 `load_dataset` on `[]` (`Instruction "train" corresponds to no data!`), at data loading (the CPU '
    "oracle loads no data)",
    "LF057/ranking/train.yaml": "llamafactory 0.9.5 data/loader.py L178-179 refuses "
    "the ranking `dpo_en_demo` for stage kto at data loading: "
    "`The dataset is not applicable in the current training stage.` (the CPU oracle loads no data)",
    "LF057/ranking/sft.yaml": "llamafactory 0.9.5 data/loader.py L178-179 refuses "
    "the ranking `dpo_en_demo` for stage sft at data loading: "
    "`The dataset is not applicable in the current training stage.` (the CPU oracle loads no data)",
    "LF057/ranking/dpo.yaml": "llamafactory 0.9.5 data/loader.py L178-179 refuses "
    "`alpaca_en_demo` for stage dpo (loaded as rm, train/dpo/workflow.py L45) at data loading: "
    "`The dataset is not applicable in the current training stage.` (the CPU oracle loads no data)",
    "LF057/ranking/rm-eval.yaml": "llamafactory 0.9.5 data/loader.py L178-179 refuses "
    "the eval dataset `alpaca_en_demo` for stage rm at data loading: "
    "`The dataset is not applicable in the current training stage.` (the CPU oracle loads no data)",
    "LF016/best-without-metric/train.yaml": "transformers 5.6.0 trainer.py L639-643: "
    "`'args.metric_for_best_model' must be provided when using 'best' save_strategy` when the Trainer is built, "
    "after data and model loading",
    "LF031/min-lr/train.yaml": "transformers 5.6.0 optimization.py L376-377: `One of min_lr or min_lr_rate "
    "should be set` when the scheduler is created at train start (run on CPU with the Trainer)",
    "LF031/min-lr/both.yaml": "transformers 5.6.0 optimization.py L452-453: `Only one of min_lr or min_lr_rate "
    "should be set` when the scheduler is created at train start (run on CPU with the Trainer)",
    "LF056/ranges/train.yaml": "peft tuners/lora/layer.py L166-167: `r` should be a positive integer value, at "
    "model load (run on CPU)",
    "LF056/ranges/dropout.yaml": "torch nn/modules/dropout.py L24-27 through peft's LoRA layer: dropout "
    "probability has to be between 0 and 1, at model load (run on CPU)",
    "LF056/ranges/lr.yaml": "torch optim/adam.py L58-59: `Invalid learning rate` when the optimizer is built at "
    "train start (run on CPU with the Trainer)",
    "LF056/ranges/batch.yaml": "torch utils/data/sampler.py L317-324: `batch_size should be a positive integer "
    "value` when the train DataLoader is built (run on CPU with the Trainer)",
    "LF056/ranges/accumulation.yaml": "transformers 5.6.0 trainer.py L2318: ZeroDivisionError when the training "
    "loop starts (run on CPU with the Trainer)",
    "LF056/ranges/val-size.yaml": "llamafactory 0.9.5 data/data_utils.py L114-115 passes 1.0 on as a share; "
    "datasets 4.0.0 arrow_dataset.py L4733-4742 refuses it at the split (the CPU oracle loads no data)",
    "XF006/nvme-4-gpus/train.yaml": "deepspeed 0.19.8 runtime/zero/partition_parameters.py L1816-1823 and "
    "runtime/swap_tensor/partitioned_param_swapper.py L357: `More elements X than buffer size Y` in `zero.Init` at "
    "model load (needs 4 processes and DeepSpeed's async_io op on an NVMe path, which this CPU host cannot run)",
}


def _error_files() -> list[tuple[Path, str, str]]:
    out = []
    for case in all_cases():
        lines = (case / "expected.txt").read_text(encoding="utf-8").splitlines()
        files = sorted({line.split(":")[0] for line in lines if line.endswith(" error")})
        args = case_args(case)
        target = args[args.index("--target") + 1] if "--target" in args else "mi300x"
        out += [(case, name, target) for name in files]
    return out


ERROR_FILES = _error_files()


# How a script names LLaMA-Factory's training entry point (docs/command-lines.md, launch shapes): what follows
# it is LLaMA-Factory's argv; `llamafactory-cli` and `-m llamafactory.cli` are followed by the subcommand.
_ENTRY_SCRIPTS = ("src/train.py", "train_bash.py", "llamafactory/launcher.py")


def _command_argv(path: Path) -> tuple[str, list[str]]:
    """The arguments of the LLaMA-Factory launch in a shell script (continuations joined, up to the first
    control operator or redirection): the subcommand and its argv."""
    text = path.read_text(encoding="utf-8").replace("\\\n", " ")
    for line in text.splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        tokens = list(lexer)
        tokens = tokens[: next((i for i, t in enumerate(tokens) if set(t) <= set(";&|<>()")), len(tokens))]
        for i, token in enumerate(tokens):
            if token == "llamafactory-cli" or (token == "llamafactory.cli" and tokens[i - 1] == "-m"):
                return tokens[i + 1], tokens[i + 2 :]
            if token.endswith(_ENTRY_SCRIPTS) or (token == "llamafactory.launcher" and tokens[i - 1] == "-m"):
                return "train", tokens[i + 1 :]
    raise AssertionError(f"{path}: no LLaMA-Factory launch")


def _judge_cli(path: Path, target: str) -> H.Verdict:
    group, argv = _command_argv(path)
    try:
        parsed, remaining = H.parse_cli(argv, "train" if group == "train" else "infer", target, cwd=path.parent)
    except SystemExit as exc:
        return H.Verdict(False, f"argparse exit {exc.code}", "parse")
    except Exception as exc:  # noqa: BLE001 - whatever TrainingArguments raise is the verdict
        return H.Verdict(False, H._err(exc), "parse")
    if remaining:
        return H.Verdict(False, f"unknown arguments {remaining}", "parse")
    model_args = next(p for p in parsed if type(p).__name__ == "ModelArguments")
    error = H.flash_attn_error(model_args) or H._template_error(parsed)
    return H.Verdict(not error, error, "load" if error else "")


def _judge_yaml(case: Path, path: Path, target: str) -> H.Verdict:
    try:
        cfg = H.load_lf_yaml(path)
    except Exception as exc:  # noqa: BLE001 - OmegaConf refuses the YAML
        return H.Verdict(False, H._err(exc), "load")
    if not isinstance(cfg, dict):
        return H.Verdict(False, "not a mapping", "load")
    group = H.lf_group(cfg)
    verdict = H.lf_verdict_detail(cfg, group, target, follow_deepspeed=True, base_dir=case)
    if "shm_comm" in verdict.error:  # a host issue: judge without the DeepSpeed launch
        verdict = H.lf_verdict_detail(cfg, group, target, follow_deepspeed=True, base_dir=case, torchrun=False)
        if "FORCE_TORCHRUN" in verdict.error:
            return H.Verdict(True, "", "needs a DeepSpeed launch")
    return verdict


def _judge_requirements(path: Path) -> H.Verdict:
    """A requirements*.txt as `pip install -r` reads it (pip 23.2.1: `parse_requirements`, then each line's
    `install_req_from_parsed_requirement`), up to the resolver, which needs the index: a conflict is CITED, as is
    every other requirement file (no CPU oracle reads pyproject.toml's or a lock file's pins as an installer does)."""
    if not is_requirements_txt(path.name):
        return H.Verdict(True)
    with warnings.catch_warnings():  # pip's own import warnings (pkg_resources): not ours
        warnings.simplefilter("ignore")
        from pip._internal.network.session import PipSession
        from pip._internal.req.constructors import install_req_from_parsed_requirement
        from pip._internal.req.req_file import parse_requirements

        try:
            for parsed in parse_requirements(str(path), session=PipSession()):
                install_req_from_parsed_requirement(parsed)
        except Exception as exc:  # noqa: BLE001 (InstallationError, InvalidMarker: pip stops)
            return H.Verdict(False, H._err(exc), "pip")
    return H.Verdict(True)


def judge(case: Path, name: str, target: str) -> H.Verdict:
    path = case / name
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        if path.suffix == ".json":
            consumers = [H.load_lf_yaml(y) for y in sorted(case.glob("*.y*ml"))]
            users = [c for c in consumers if isinstance(c, dict) and "deepspeed" in c]
            training = next((c for c in users if c["deepspeed"] == name), users[0] if users else None)
            return H.ds_verdict_detail(path, training_args=training, target=target, build_scheduler=True)
        if path.suffix in (".yaml", ".yml"):
            return _judge_yaml(case, path, target)
        if is_requirement_file(path.name):
            return _judge_requirements(path)
        return _judge_cli(path, target)


@pytest.mark.parametrize(
    ("case", "name", "target"), ERROR_FILES, ids=[f"{c.relative_to(CASES_DIR)}/{n}" for c, n, _ in ERROR_FILES]
)
def test_error_fixture_makes_the_real_tool_fail(case: Path, name: str, target: str) -> None:
    key = f"{case.relative_to(CASES_DIR).as_posix()}/{name}"
    verdict = judge(case, name, target)
    if key in CITED:
        assert verdict.ok, f"{key}: the oracle now rejects it ({verdict.error[:200]}); drop it from CITED"
        return
    assert not verdict.ok, f"{key}: the real tool accepts it, so this is not an error (a warning at most)"


def test_cited_cases_exist() -> None:
    keys = {f"{c.relative_to(CASES_DIR).as_posix()}/{n}" for c, n, _ in ERROR_FILES}
    assert set(CITED) <= keys, set(CITED) - keys
