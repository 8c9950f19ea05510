"""The classes of defect issue 34 closed, kept closed: each has one owner, and these tests fail when code
bypasses it.

- **Reading a file a user, a config or the machine names**: only through `cfgopt/text/user_files.py` (a FIFO blocks
  a plain open forever, `/dev/zero` reads forever). A scan of the source finds every `open(`, `.open(`,
  `.read_text(` and `.read_bytes(`; each one outside the owner is in `ALLOWED_READS` with why it is not such
  a file (cfgopt's own snapshots, files cfgopt wrote, writes).
- **An integer in user text**: only through `cfgopt/text/user_text.py` (`²` passes `isdigit()`, not `int()`). The
  scan finds every `int(` and every `isdigit()` / `isdecimal()` / `isnumeric()`; each one outside the owner is in
  `ALLOWED_INTS` with why its input is no user text, or why Python's own `int()` is the consumer's reading.
- **A number in a parsed value** (YAML, JSON, TOML): only through `cfgopt/text/user_text.py` (`is_int`, `is_number`,
  `positive_int`, `as_float`): `bool` subclasses `int`, and `batch_size: true` is no batch of one. The scan finds
  every test that pairs `isinstance(x, bool)` with `isinstance(x, int)` or `isinstance(x, (int, float))` on the same
  value in one expression (the guard re-typed); a plain `isinstance(x, bool)` ("is it a bool") stays free.
- **A user string printed**: through `document.shown`. Every command that prints is run on a project whose file
  names, target name and keys carry escape sequences, line breaks and bidi controls: nothing raw comes out.
- **A requirement, a package name or a version parsed**: only by `cfgopt/text/requirements/` (four readers that
  disagreed: a one-line `dependencies = [...]` was the pins' release but not the environment's). The scan finds every
  pattern (`re.*`, `lazy`) that reads one (a distribution name, a name's separators, a specifier's operators, a
  dotted release) or is named for one; each one outside the owner is in `ALLOWED_PATTERNS` with why it is not.
- **A command reading user files**: under `cfgopt/text/timelimit.py`. Every such command is run with a loader
  that never ends: it stops with the time limit's message, exit 2.

An entry of an allow-list that matches nothing fails too: the lists stay exact.
"""

from __future__ import annotations

import ast
import re
import time
from pathlib import Path

import pytest
from rule_cases import ROOT, run_cli
from rule_cases import TRAIN as MINIMAL_TRAIN

PACKAGE = ROOT / "cfgopt"
OWNERS = {"cfgopt/text/user_files.py", "cfgopt/text/user_text.py"}

# (module, function) -> why its reads are not of a file a user, a config or the machine names
ALLOWED_READS = {
    ("cfgopt/knowledge/schema.py", "_read"): "cfgopt's own snapshot files (cfgopt/knowledge/schemas/)",
    ("cfgopt/knowledge/versions.py", "build_index"): "cfgopt's own snapshot files (scripts/sync_schemas.py)",
    ("cfgopt/knowledge/versions.py", "build_ds_keys"): "cfgopt's own snapshot files (scripts/sync_schemas.py)",
    ("cfgopt/knowledge/versions.py", "_ds_keys"): "cfgopt's own key tables (cfgopt/knowledge/schemas/ds-keys.json)",
    (
        "cfgopt/knowledge/requirement_pins.py",
        "requirement_metadata",
    ): "cfgopt's own snapshot (scripts/sync_requirement_metadata.py)",
    (
        "cfgopt/knowledge/versions.py",
        "index",
    ): "cfgopt's own version index (cfgopt/knowledge/schemas/version-index.json)",
    ("cfgopt/rules/ds025_optimizer_scheduler_signature.py", "_snapshot"): "cfgopt's own ds-optimizers.json",
    ("cfgopt/tune/search.py", "ResultCache.__init__"): "tune's result cache, a JSON file tune wrote itself",
    ("cfgopt/verify/runner.py", "run_config"): "the metrics JSON verify's child wrote into its work folder",
    ("cfgopt/verify/runner.py", "prepare_assets"): "the JSON verify's child wrote into its work folder",
    ("cfgopt/verify/runner.py", "_run"): "opens the run's log for writing",
    ("cfgopt/verify/worker.py", "main"): "the spec JSON the parent verify wrote into its work folder",
    ("cfgopt/text/writer.py", "_overwrite"): "writes a file already read through read_bounded (atomic_write)",
}

# (module, function) -> why its int() / isdigit() has no user text to misread
ALLOWED_INTS = {
    ("cfgopt/rules/support/gpu_count.py", "pinned_world"): "a quotient of numbers already parsed (`is_number`), "
    "checked `is_integer()` first: no user text",
    **{
        ("cfgopt/verify/tokens.py", scope): "int() of a tensor's sum (a count the trainer's batch holds), no user text"
        for scope in ("_from_4d_mask", "_from_positions", "_from_labels", "_from_2d_mask", "real_tokens", "count_batch")
    },
    ("cfgopt/verify/worker.py", "capacity_per_step"): "int() of TrainingArguments' parsed integers and the "
    "config's cutoff_len that LLaMA-Factory already parsed (the run started)",
    ("cfgopt/environment/gpus.py", "_drm_models"): "int(x, 16) of sysfs PCI ids (`0x1002`); a ValueError is caught",
    ("cfgopt/loaders/json_loader.py", "_SpanParser.value"): "a JSON number json.loads accepted (ASCII digits only)",
    ("cfgopt/rules/__init__.py", "_is_rule_module"): "isdecimal() of a file name in cfgopt's own rules folder (the "
    "rule-module pattern's Unicode `\\d`, which it replaced), no user text nor a number read",
    ("cfgopt/memory/config_values.py", "integer_at"): "an integral float of the parsed config",
    ("cfgopt/memory/estimate.py", "estimate"): "a GPU count argtypes / the project config already checked",
    ("cfgopt/rules/ds005_invalid_value.py", "InvalidValue._numbers"): "int() of a bool (True is 1)",
    ("cfgopt/rules/ds007_batch_size_arithmetic.py", "BatchSizeArithmetic.check"): "int() of a bool",
    ("cfgopt/rules/lf002_wrong_value_type.py", "WrongValueType.check"): "int() of a bool",
    ("cfgopt/rules/lf002_wrong_value_type.py", "WrongValueType._float_for_integer"): "int() of a parsed float "
    "that is_integer() holds: the integer it stands for",
    ("cfgopt/rules/support/integer_fields.py", "integer_use"): "int() of a parsed float that is_integer() holds",
    ("cfgopt/rules/lf002_wrong_value_type.py", "_as_number"): "HfArgumentParser converts a command-line value "
    "with int(): its reading, `٣` and `1_000` included, is LLaMA-Factory's",
    ("cfgopt/rules/support/deepspeed.py", "zero_stage"): "DeepSpeed's own int(stage) of a JSON value, mirrored; "
    "errors caught",
    ("cfgopt/knowledge/schema_validators.py", "_integer_scale_param"): "DeepSpeed's fp16 validator's int(), mirrored",
    ("cfgopt/rules/lf002_wrong_value_type.py", "_string_switch_crashes"): "LLaMA-Factory's own int() of the "
    "switch (finetuning_args.py L598), mirrored: what it accepts decides whether the start-up stops",
    (
        "cfgopt/job/data_lengths.py",
        "infer_seqlen",
    ): "LLaMA-Factory's infer_seqlen, copied: int() of a float it computed",
    ("cfgopt/rules/support/ds_blocks.py", "trainer_warmup"): "int() of a warm-up count already parsed as a finite "
    "number (the Trainer's own int())",
    ("cfgopt/knowledge/schema_validators.py", "_dynamic_loss_scale"): "DeepSpeed's fp16 validator's int(), mirrored",
    (
        "cfgopt/knowledge/schema_validators.py",
        "_stage",
    ): "DeepSpeed's zero validator's int(stage), mirrored; errors caught",
    ("cfgopt/plan/space.py", "zero_of"): "DeepSpeed's int(stage) of a JSON value, mirrored; errors caught",
    ("cfgopt/verify/numerics.py", "_by_step"): "steps of the metrics JSON verify's child wrote",
    ("cfgopt/verify/synthetic.py", "_sentence"): "int() of random floats",
    ("cfgopt/verify/synthetic.py", "_lengths"): "int() of random floats",
    ("cfgopt/verify/synthetic.py", "_words_for"): "int() of a float",
    ("cfgopt/verify/worker.py", "_make_callback.MetricsCallback.on_train_end"): "RANK, set by torchrun",
    ("cfgopt/verify/worker.py", "train"): "RANK, set by torchrun",
}

_READS = {"open", "read_text", "read_bytes"}
_DIGIT_CHECKS = {"isdigit", "isdecimal", "isnumeric"}


def _calls() -> list[tuple[str, str, str, int]]:
    """(kind, module, function qualname, line) of every raw read, int() and digit check in the package."""
    found: list[tuple[str, str, str, int]] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(ROOT).as_posix()
        _visit(ast.parse(path.read_text(encoding="utf-8")), module, [], found)
    return found


def _visit(node: ast.AST, module: str, scopes: list[str], found: list) -> None:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        scopes = [*scopes, node.name]
    if isinstance(node, ast.Call):
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        if name in _READS and (isinstance(func, ast.Attribute) or name == "open"):
            found.append(("read", module, ".".join(scopes) or "<module>", node.lineno))
        elif (isinstance(func, ast.Name) and name == "int") or name in _DIGIT_CHECKS:
            found.append(("int", module, ".".join(scopes) or "<module>", node.lineno))
    for child in ast.iter_child_nodes(node):
        _visit(child, module, scopes, found)


@pytest.mark.parametrize(("kind", "allowed"), [("read", ALLOWED_READS), ("int", ALLOWED_INTS)])
def test_nothing_bypasses_the_owner(kind: str, allowed: dict) -> None:
    calls = [(module, scope, line) for k, module, scope, line in _calls() if k == kind and module not in OWNERS]
    bypassing = [f"{module}:{line} ({scope})" for module, scope, line in calls if (module, scope) not in allowed]
    owner = "cfgopt/text/user_files.py (read_bounded)" if kind == "read" else "cfgopt/text/user_text.py (integer)"
    assert not bypassing, f"use {owner}, or add an entry with its reason: {bypassing}"
    stale = sorted(set(allowed) - {(module, scope) for module, scope, _ in calls})
    assert not stale, f"allow-list entries that match nothing: {stale}"
    assert all(reason.strip() for reason in allowed.values())


# --------------------------------------------------------------------------- one reading of a number that is no bool

NUMBER_OWNER = "cfgopt/text/user_text.py"
_NUMBER_TYPES = ({"int"}, {"int", "float"})


def _isinstance_of(node: ast.AST) -> tuple[str, set[str]] | None:
    """(the value tested, the type names) of an `isinstance(value, T)` / `isinstance(value, (T, U))` call, where
    `not` around it is looked through; None for anything else."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        node = node.operand
    if not (isinstance(node, ast.Call) and getattr(node.func, "id", "") == "isinstance" and len(node.args) == 2):
        return None
    types = node.args[1].elts if isinstance(node.args[1], ast.Tuple) else [node.args[1]]
    if not all(isinstance(t, ast.Name) for t in types):
        return None
    return ast.dump(node.args[0]), {t.id for t in types}  # type: ignore[attr-defined]


def _terms(node: ast.BoolOp) -> list[ast.AST]:
    """The operands of a chain of `and` / `or`, nested chains flattened."""
    out: list[ast.AST] = []
    for value in node.values:
        out.extend(_terms(value) if isinstance(value, ast.BoolOp) else [value])
    return out


def retyped_number_guards(tree: ast.AST) -> list[int]:
    """The lines of every `and` / `or` that tests one value both for a bool and for an int (or a number)."""
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.BoolOp):
            continue
        tests = [found for found in map(_isinstance_of, _terms(node)) if found is not None]
        bools = {value for value, types in tests if types == {"bool"}}
        if any(value in bools and types in _NUMBER_TYPES for value, types in tests):
            lines.append(node.lineno)
    return sorted(set(lines))


def test_no_number_guard_is_retyped() -> None:
    found = [
        f"{path.relative_to(ROOT).as_posix()}:{line}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.relative_to(ROOT).as_posix() != NUMBER_OWNER
        for line in retyped_number_guards(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert not found, f"use {NUMBER_OWNER} (is_int, is_number, positive_int, as_float): {found}"


@pytest.mark.parametrize(
    "source",
    [
        "ok = isinstance(x, int) and not isinstance(x, bool)",
        "bad = isinstance(x, bool) or not isinstance(x, (int, float)) or x <= 0",
        "n = all(isinstance(v, (float, int)) and not isinstance(v, bool) for v in (a, b))",
        "if y and (isinstance(o.v, int) and not isinstance(o.v, bool)):\n    pass",
    ],
)
def test_the_scan_sees_each_shape_of_the_guard(source: str) -> None:
    assert retyped_number_guards(ast.parse(source)) == [1]


@pytest.mark.parametrize(
    "source",
    [
        "flag = value if isinstance(value, bool) else default",
        "other = isinstance(x, int) and not isinstance(y, bool)",
        "hashable = isinstance(v, (str, int, float, bool)) and v in mapping",
    ],
)
def test_the_scan_leaves_a_plain_bool_test(source: str) -> None:
    assert retyped_number_guards(ast.parse(source)) == []


# --------------------------------------------------------------------------- one reader of requirements and versions

REQUIREMENT_OWNER = "cfgopt/text/requirements/"  # the one reader: a package, one module per format
# what a pattern reading a requirement or a version has in it
_SIGNATURES = {
    "a distribution name": "A-Za-z0-9._-",
    "a name's separators": "[-_.]+",
    "a specifier's operators": "~=",
    "an operator class": "<>=!~",
    "a dotted release": r"\d+(?:\.\d+)",
}
_NAMED_FOR = re.compile("requirement|pep|version", re.IGNORECASE)
_PATTERN_CALLS = {"compile", "match", "search", "fullmatch", "findall", "finditer", "sub", "subn", "split"}
# (module, function qualname) -> why its pattern reads no requirement and no version of a package
ALLOWED_PATTERNS = {
    (
        "cfgopt/environment/node.py",
        "_cuda_version",
    ): "the CUDA toolkit's version.txt (`CUDA Version 12.4.131`), no package",
    ("cfgopt/rules/support/llamafactory.py", "model_params_billion"): "a model name's size (`8B`, `8x7B`, `0.6B`)",
}


def _pattern_text(node: ast.expr) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):  # an f-string: its literal parts
        return "".join(v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
    return ""


def _is_pattern_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call) or not node.args:
        return False
    func = node.func
    if isinstance(func, ast.Name):
        return func.id == "lazy"
    return isinstance(func, ast.Attribute) and func.attr in _PATTERN_CALLS and getattr(func.value, "id", "") == "re"


def _patterns(node: ast.AST, module: str, scopes: list[str], found: list, target: str = "") -> None:
    """(module, scope, line, why) of every pattern that reads a requirement or a version, or is named for one."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        scopes = [*scopes, node.name]
    if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
        target = node.targets[0].id
    if _is_pattern_call(node):
        text = _pattern_text(node.args[0])  # type: ignore[attr-defined]
        why = [name for name, signature in _SIGNATURES.items() if signature in text]
        why += [f"named {target}"] if _NAMED_FOR.search(target) else []
        if why:
            found.append((module, ".".join(scopes) or "<module>", node.lineno, why))  # type: ignore[attr-defined]
    for child in ast.iter_child_nodes(node):
        _patterns(child, module, scopes, found, target)


def test_nothing_else_parses_a_requirement_or_a_version() -> None:
    found: list[tuple[str, str, int, list[str]]] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(ROOT).as_posix()
        _patterns(ast.parse(path.read_text(encoding="utf-8")), module, [], found)
    assert any(module.startswith(REQUIREMENT_OWNER) for module, *_ in found), (
        "the scan no longer finds the owner's patterns"
    )
    outside = [(m, scope, line, why) for m, scope, line, why in found if not m.startswith(REQUIREMENT_OWNER)]
    bypassing = [
        f"{m}:{line} ({scope}): {', '.join(why)}"
        for m, scope, line, why in outside
        if (m, scope) not in ALLOWED_PATTERNS
    ]
    assert not bypassing, f"use {REQUIREMENT_OWNER}, or add an entry with its reason: {bypassing}"
    stale = sorted(set(ALLOWED_PATTERNS) - {(module, scope) for module, scope, _, _ in outside})
    assert not stale, f"allow-list entries that match nothing: {stale}"


# --------------------------------------------------------------------------- one escape for every string printed

HOSTILE = "x\x1b[31m\u202e\n+++ forged"
TRAIN = (
    MINIMAL_TRAIN
    + """\
lr_scheduler_type: Cosine
"x\\e[31mkey\\u202e": 1
dataset_dir: "d\\e[2J\\nforged"
"""
)
_RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def test_no_user_string_is_printed_raw(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / f"dir{HOSTILE}"
    folder.mkdir()
    name = f"train{HOSTILE}.yaml"
    (folder / name).write_text(TRAIN)
    (folder / "pyproject.toml").write_text(
        '[tool.cfgopt]\ntarget = { name = "gpu\\u001b[31m\\u202e\\nforged", memory-gib = 8, bf16 = true, '
        'vendor = "nvidia" }\nenvironment = "env\\u001b[31m\\nforged"\n'
    )
    (folder / "env\x1b[31m\nforged").write_text("llamafactory==0.9.5\n")  # issue 43: its name in every summary
    monkeypatch.chdir(folder)
    commands = [
        ["lint", name],
        ["lint", "--output-format", "concise", "--show-fixes", "--statistics", name],
        ["lint", "--show-settings", name],
        ["fix", name],
        ["fix", "--show-fixes", "--unsafe-fixes", name],
        ["estimate", name],
        ["doctor", name],
        ["rule", "LF003"],
        ["schema", "export", "--out", f"out{HOSTILE}"],
    ]
    for argv in commands:
        _code, out, err = run_cli(argv)
        assert not _RAW.search(out + err), (argv, [line for line in (out + err).splitlines() if _RAW.search(line)])
        assert not any(line.startswith("+++ forged") or line == "forged" for line in (out + err).splitlines()), argv


# --------------------------------------------------------------------------- one watchdog for every command


@pytest.mark.parametrize(
    "argv",
    [
        ["lint"],
        ["fix"],
        ["fix", "--write"],
        ["estimate", "--target", "h200"],
        ["doctor"],
    ],
)
def test_every_command_reading_user_files_has_the_watchdog(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str]
) -> None:
    from cfgopt.loaders import yaml_loader

    def endless(*_args, **_kwargs):
        while True:
            time.sleep(0.01)

    (tmp_path / "train.yaml").write_text(TRAIN)
    # `compose` is looked up in the module on each call (a module imported meanwhile binds nothing of it)
    monkeypatch.setattr(yaml_loader, "compose", endless)
    monkeypatch.setenv("CFGOPT_FILE_TIMEOUT", "0.3")
    code, _out, err = run_cli([*argv, str(tmp_path / "train.yaml")])  # ends only if the watchdog fires
    assert code == 2 and "took longer than 0.3 s" in err, err
