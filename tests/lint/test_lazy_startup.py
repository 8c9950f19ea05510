"""Lint start-up (issue 45): patterns compiled when first used give `re.compile`'s answers; a config with no
local dataset never imports the data profile; without a target the hardware checks are not imported; what a seed
lint does not use is imported on the branch that does. The time itself is measured in bench/results.md, never here."""

from __future__ import annotations

import contextlib
import gc
import importlib
import io
import re
import subprocess
import sys

import pytest
from rule_cases import ROOT

from cfgopt.cli import main
from cfgopt.knowledge.targets import HARDWARE_CHECKS
from cfgopt.rules import rule_modules
from cfgopt.text.patterns import LazyPattern, lazy

SUBJECTS = ["", "a", "llama-3 8b", "Qwen2.5-7B", "${oc.env:HOME}", "x=1", "1e-4", "+cu121", "mi300x", "a\nb", "é€😀"]


def _rule_patterns() -> list[LazyPattern]:
    modules = [f"cfgopt.rules.{m}" for m in rule_modules()]
    modules += ["cfgopt.rules", "cfgopt.rules.suppressions", "cfgopt.rules.support.requirements"]
    modules += ["cfgopt.rules.support.wording"]
    found: list[LazyPattern] = []
    for name in modules:
        for value in vars(importlib.import_module(name)).values():
            values = value if isinstance(value, tuple) else (value,)
            for item in values:
                parts = item if isinstance(item, tuple) else (item,)
                found += [p for p in parts if isinstance(p, LazyPattern)]
    return found


def test_a_lazy_pattern_answers_as_re_compile() -> None:
    patterns = [*_rule_patterns(), lazy(r"(?P<k>\w+)=(\d*)", re.ASCII), lazy(r"\s+"), lazy(r"(a)|b", re.I)]
    assert len(patterns) >= 15
    for pattern in patterns:
        plain = re.compile(pattern.pattern, pattern.flags)
        for text in [*SUBJECTS, pattern.pattern]:
            for method in ("match", "fullmatch", "search"):
                got, want = getattr(pattern, method)(text), getattr(plain, method)(text)
                assert (got and (got.span(), got.groups())) == (want and (want.span(), want.groups()))
            assert pattern.findall(text) == plain.findall(text)
            assert [m.span() for m in pattern.finditer(text)] == [m.span() for m in plain.finditer(text)]
            assert pattern.split(text) == plain.split(text)
            assert pattern.sub("_", text) == plain.sub("_", text) and pattern.subn("_", text, 1) == plain.subn(
                "_", text, 1
            )
        assert pattern.compiled is pattern.compiled  # compiled once


def test_a_lazy_pattern_compiles_at_first_use_only() -> None:
    pattern = lazy(r"[unclosed")  # an error shows at the first use, as it would have at import
    with pytest.raises(re.error):
        pattern.search("x")
    assert lazy(r"a+")._compiled is None


def _modules_after_lint(*args: str) -> set[str]:
    code = (
        "import sys; from cfgopt.cli import main; main(['lint', '-q', *sys.argv[1:]]); "
        "print(); print(' '.join(sorted(m for m in sys.modules if m.startswith('cfgopt.'))))"
    )
    run = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True, check=False)
    return set(run.stdout.strip().splitlines()[-1].split())


def test_no_local_dataset_no_data_profile_and_no_target_no_hardware_check() -> None:
    """The seed's dataset is a LLaMA-Factory name with no dataset_info.json in the project: where the data is gets
    looked up, the profile and its tokenizer tables are not imported; nor, with no target, the hardware checks."""
    modules = _modules_after_lint("--isolated", "--target", "none", "fixtures/seed/llama3_lora_sft.yaml")
    assert "cfgopt.job.data_location" in modules and "cfgopt.rules.lf045_data_truncated_by_cutoff" in modules
    assert not {"cfgopt.job.data_profile", "cfgopt.job.data_tokens", "cfgopt.job.data_lengths"} & modules
    hardware = {f"cfgopt.rules.{m}" for m in rule_modules() if m.split("_")[0].upper() in HARDWARE_CHECKS}
    assert not hardware & modules
    with_target = _modules_after_lint("--isolated", "--target", "h100", "fixtures/seed/llama3_lora_sft.yaml")
    assert "cfgopt.rules.mem003_zero_stage_higher_than_needed" in with_target


def test_local_data_is_profiled(tmp_path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "dataset_info.json").write_text('{"mine": {"file_name": "mine.json"}}')
    (tmp_path / "data" / "mine.json").write_text('[{"instruction": "say hi", "input": "", "output": "hi"}]')
    seed = (ROOT / "fixtures" / "seed" / "llama3_lora_sft.yaml").read_text()
    (tmp_path / "train.yaml").write_text(seed.replace("alpaca_en_demo", "mine").replace("deepspeed:", "# deepspeed:"))
    code = (
        "import sys; from cfgopt.cli import main; main(['lint', '-q', '--isolated', 'train.yaml']); "
        "print(); print('cfgopt.job.data_profile' in sys.modules)"
    )
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=False)
    assert run.stdout.strip().splitlines()[-1] == "True", run.stderr[-2000:]


# Compiled at import on purpose: the standard library's own (json compiles NUMBER_RE when imported).
_COMPILED_AT_IMPORT = {"cfgopt.loaders.json_loader.NUMBER_RE"}


def test_a_seed_lint_imports_no_dataclasses_and_compiles_no_unused_pattern() -> None:
    """What a seed lint imports defines its module-level patterns with `lazy` (compiled when first
    used; the regular expressions of pins, versions, loaders and documents cost a run milliseconds it did not
    use), and `dataclasses` (with `inspect`) and `random` stay out of it."""
    code = (
        "import re, sys; from cfgopt.cli import main; main(['lint', '-q', *sys.argv[1:]]); print(); "
        "mods = [m for m in sorted(sys.modules) if m.startswith('cfgopt.')]; "
        "flat = lambda v: [x for i in (v.values() if isinstance(v, dict) else v if isinstance(v, tuple) else [v]) "
        "for x in (i if isinstance(i, tuple) else [i])]; "
        "bad = [f'{m}.{k}' for m in mods for k, v in vars(sys.modules[m]).items() "
        "if any(isinstance(x, re.Pattern) for x in flat(v))]; "
        "print(' '.join(sorted(sys.modules))); print(' '.join(bad))"
    )
    args = ["--isolated", "fixtures/seed/llama3_lora_sft.yaml"]
    run = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True, check=False)
    modules, compiled = (set(line.split()) for line in run.stdout.splitlines()[-2:])
    assert "cfgopt.text.requirements" in modules  # the run read what it judges
    assert not {"dataclasses", "inspect", "random"} & modules
    assert compiled <= _COMPILED_AT_IMPORT


# The lazy patterns a seed lint in this repository compiles: the string scanner of its pyproject.toml (the job's
# project, read for its pins and environment), whether that file has a `[tool.cfgopt]` table, and LF037's Llama name.
_COMPILED_BY_A_SEED_LINT = {
    "cfgopt.text.requirements.manifests._TOKENS",
    "cfgopt.lint.project_config._MENTIONS_TABLE",
    "cfgopt.rules.lf037_lora_target_not_in_model._NAMES",
}


def test_a_seed_lint_compiles_only_the_patterns_it_needs() -> None:
    """A seed lint (no target) answers model names, versions, requirement names and specifiers, TOML headers and
    line breaks with str methods or `needs` (issue 45: 36 patterns, 4.4 ms of compiling, before): the lazy
    patterns it compiles are the few above."""
    code = (
        "import sys; from cfgopt.cli import main; from cfgopt.text.patterns import LazyPattern; "
        "main(['lint', '-q', *sys.argv[1:]]); print(); "
        "mods = [m for m in sorted(sys.modules) if m.startswith('cfgopt.')]; "
        "flat = lambda v: [x for i in (v.values() if isinstance(v, dict) else v if isinstance(v, tuple) else [v]) "
        "for x in (i if isinstance(i, tuple) else [i])]; "
        "print(' '.join(f'{m}.{k}' for m in mods for k, v in vars(sys.modules[m]).items() "
        "if any(isinstance(x, LazyPattern) and x._compiled is not None for x in flat(v))))"
    )
    args = ["fixtures/seed/llama3_lora_sft.yaml"]
    run = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True, check=False)
    assert set(run.stdout.splitlines()[-1].split()) <= _COMPILED_BY_A_SEED_LINT, run.stderr[-2000:]


def test_a_short_run_in_process_leaves_the_collector_as_it_was() -> None:
    """The collector is off during a lint and frozen only at the end of the process's own run (`main()` with no
    arguments): a caller of `main(argv)` (the tests, an editor) gets it back enabled, with nothing frozen."""
    frozen = gc.get_freeze_count()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        main(["lint", "--isolated", str(ROOT / "fixtures/seed/llama3_lora_sft.yaml")])
    assert gc.isenabled() and gc.get_freeze_count() == frozen
    gc.disable()
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            main(["rules"])
        assert not gc.isenabled()  # a caller that turned it off keeps it off
    finally:
        gc.enable()


# Imported on the branch that uses them (issue 45): an `accelerate launch` line, a requirements file pip reads, a
# model shape asked for NVMe offload, packing asked of the job, a did-you-mean for an unknown name, the memory
# rules' access to the estimate for a pure bf16 run (PF015).
_NOT_FOR_A_SEED_LINT = (
    "cfgopt.knowledge.accelerate_plan",
    "cfgopt.text.requirements.pip_files",
    "cfgopt.text.requirements.pip_encoding",
    "cfgopt.knowledge.model_shapes",
    "cfgopt.knowledge.packing",
    "cfgopt.text.suggest",
    "cfgopt.rules.support.memory_advice",
    "cfgopt.environment.probe",  # verify's and tune's: the planner's `Platform` is defined beside `Environment`
)


def _imported_by(argv: list[str], names: tuple[str, ...]) -> list[str]:
    """Which of `names` a process running `cfgopt ARGV` (from the repository) has imported by its end."""
    code = (
        "import sys; from cfgopt.cli import main; main(sys.argv[2:]); sys.stdout.flush(); "
        "print('\\nimported:', *(m for m in sys.argv[1].split(',') if m in sys.modules))"
    )
    run = subprocess.run(
        [sys.executable, "-c", code, ",".join(names), *argv], cwd=ROOT, capture_output=True, text=True, check=False
    )
    last = run.stdout.splitlines()[-1]
    assert last.startswith("imported:"), run.stderr[-2000:]
    return last.split()[1:]


def test_a_seed_lint_imports_no_module_it_does_not_use() -> None:
    """The command bench/ times (the project's own config and pins read); the time is measured there, never here.
    With a target the memory model asks for the accelerate plan, the model's shape and packing: only the readers
    stay out."""
    seed = "fixtures/seed/llama3_lora_sft.yaml"
    assert _imported_by(["lint", "-q", seed], _NOT_FOR_A_SEED_LINT) == []
    readers = ("cfgopt.text.requirements.pip_files", "cfgopt.text.requirements.pip_encoding", "cfgopt.text.suggest")
    assert _imported_by(["lint", "-q", "--target", "mi300x", "--gpus", "8", seed], readers) == []
    # the time limit and the file readers are small classes over signal's C module (0.5 ms of import each), the
    # memory model's are no dataclasses (`inspect`, 4 ms); where the interpreter's own start-up does not import
    # them (a .pth file of an installed package may)
    bare = subprocess.run([sys.executable, "-c", "import sys; print(*sys.modules)"], capture_output=True, text=True)
    # and pathlib's `urllib.parse` (with `ipaddress`), which only `as_uri()` calls (cfgopt/text/lean_pathlib.py)
    named = ("contextlib", "signal", "dataclasses", "inspect", "urllib.parse", "ipaddress")
    stdlib = tuple(m for m in named if m not in bare.stdout.split())
    for argv in (["lint", "-q", seed], ["lint", "-q", "--target", "mi300x", "--gpus", "8", seed]):
        assert _imported_by(argv, stdlib) == []


def test_the_branches_that_use_them_still_import_them(tmp_path) -> None:
    """The other side of the test above: a requirements file loads pip's reader, an unknown key the did-you-mean."""
    (tmp_path / "requirements.txt").write_text("llamafactory==0.9.5\n")
    (tmp_path / "train.yaml").write_text("model_name_or_path: m\nstage: sft\ndo_train: true\nfinetuning_typ: lora\n")
    imported = _imported_by(["lint", "-q", str(tmp_path / "train.yaml")], _NOT_FOR_A_SEED_LINT)
    assert {"cfgopt.text.requirements.pip_files", "cfgopt.text.requirements.pip_encoding"} <= set(imported)
    assert "cfgopt.text.suggest" in imported


def test_fix_loads_its_signal_handler_only_to_write() -> None:
    """`fix --diff` writes nothing, so it has nothing to undo on SIGTERM: no handler (and no `threading`). That
    `fix --write` still cleans up is tests/adversarial/test_fix_write_leaves_no_trace.py's."""
    argv = ["fix", "--diff", "-q", "fixtures/seed/llama3_lora_sft.yaml"]
    assert _imported_by(argv, ("cfgopt.text.termination", "threading")) == []


# The shell lexer and the launch-script loader: a fix reads them back for a launch script only.
_LAUNCH_LOADER = ("cfgopt.loaders.launch", "cfgopt.loaders.shell", "shlex")


def test_a_fix_of_a_yaml_imports_no_dataclasses_nor_the_launch_loader() -> None:
    """What the pre-commit hook runs on every commit: the fix's records (`FixResult`, `PlanPart`, `Parsed`) are
    plain classes, no dataclasses (`inspect`, `ast`, `dis`, `tokenize`: 6 ms under -X importtime), and the text a
    YAML's fix is checked against is read back with the YAML loader alone; a launch script's fix still reads it with
    the shell's.
    (With a target, an unsafe ZeRO fix looks for the scripts that read the DeepSpeed JSON: the seed's train.sh.)"""
    bare = subprocess.run([sys.executable, "-c", "import sys; print(*sys.modules)"], capture_output=True, text=True)
    stdlib = tuple(m for m in ("dataclasses", "inspect") if m not in bare.stdout.split())
    seed = "fixtures/seed/llama3_lora_sft.yaml"
    assert _imported_by(["fix", "--diff", "-q", seed], stdlib + _LAUNCH_LOADER) == []
    unsafe = ["fix", "--diff", "-q", "--unsafe-fixes", "--target", "mi300x", "--gpus", "8", seed]
    assert _imported_by(unsafe, stdlib) == []
    assert "cfgopt.loaders.launch" in _imported_by(["fix", "--diff", "-q", "fixtures/seed/train.sh"], _LAUNCH_LOADER)
