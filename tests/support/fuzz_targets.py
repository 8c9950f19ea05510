"""Fuzz targets shared by the short CI run (tests/adversarial/test_fuzz.py) and the long run (scripts/fuzz_long.py)."""

from __future__ import annotations

import json
import re
import tempfile
from collections import Counter
from pathlib import Path

from hypothesis import strategies as st
from repo_paths import ROOT

from cfgopt.job.settings import Settings
from cfgopt.knowledge import schema
from cfgopt.lint.engine import build_project
from cfgopt.lint.fixer import fix_paths
from cfgopt.loaders.json_loader import load_json
from cfgopt.loaders.launch import find_commands
from cfgopt.loaders.yaml_loader import load_yaml
from cfgopt.text.document import Document, DocumentError

LF_KEYS = sorted(schema.llamafactory().group("train"))[:400]
DS_KEYS = sorted(schema.deepspeed().top_level_keys)
ZERO_KEYS = sorted(schema.deepspeed().field_names("DeepSpeedZeroConfig"))
SCALARS = st.one_of(
    st.sampled_from(
        [
            "true",
            "false",
            "yes",
            "off",
            "null",
            "~",
            "1e-4",
            "1.0e-4",
            "0x10",
            "010",
            "'4'",
            '"false"',
            "fa2",
            "Fa",
            "sdpa",
            "auto",
            "bf16",
            "[1, 2]",
            "{a: 1}",
            "'${x}'",
            ".inf",
            "-1",
            "3:20",
            # issue 26 (round 2): values that overflow, are not numbers, or carry escapes and separators
            ".nan",
            "-.inf",
            "1e400",
            "1e300",
            "1.0e308",
            "1" + "0" * 40,
            "[fa2]",
            '"\\ud800"',
            '"a\\e[31mb\\x85c"',
            '"x\\u2028y"',
            # issue 34 (round 3): digits isdigit() takes and int() refuses (or reads as another number)
            "²",
            "'٣'",
            '"１"',
        ]
    ),
    st.integers(-5, 10**6).map(str),
    st.text(alphabet="abcxyz_-./ :#'\"", max_size=12),
)


# Issue 18: value properties and the line breaks PyYAML knows (a lone CR, NEL, LS, PS as well as LF/CRLF)
PROPERTIES = st.sampled_from(["", "", "", "&a ", "&b ", "!!str ", "!!int ", "&c !!str "])
ALIAS_LINES = st.sampled_from(
    [
        "run_name: *a",
        "output_dir: *b",
        "logging_steps: *a",
        "max_grad_norm: *c",
        "<<: {lr_scheduler_type: Cosine, flash_attn: Fa}",  # issue 26: keys that arrive through a merge
        "base: &m {bf16: true}\n<<: *m",
    ]
)
BREAKS = st.sampled_from(["\n", "\n", "\r\n", "\r", "\x85", "\u2028", "\u2029", "\r\r\n"])


def mutate_key(key: str, draw) -> str:
    if draw(st.booleans()):
        return key
    i = draw(st.integers(0, max(0, len(key) - 1)))
    return key[:i] + draw(st.sampled_from(["", "x", "_", key[i : i + 1] * 2])) + key[i + 1 :]


@st.composite
def yaml_documents(draw) -> bytes:
    lines = ["model_name_or_path: m"] if draw(st.booleans()) else []
    for _ in range(draw(st.integers(0, 12))):
        key = mutate_key(draw(st.sampled_from([*LF_KEYS, "compute_type", "disable_torch_compile"])), draw)
        comment = draw(st.sampled_from(["", "  # c", " #x", "  # cfgopt: ignore[LF003] note", " # cfgopt: ignore"]))
        lines.append(f"{key}: {draw(PROPERTIES)}{draw(SCALARS)}{comment}")
    if draw(st.booleans()):
        lines.insert(draw(st.integers(0, len(lines))), draw(st.sampled_from(["# comment", "", "---", "  nested: 1"])))
    if draw(st.booleans()):
        lines.append(draw(ALIAS_LINES))
    nl = draw(st.sampled_from(["\n", "\r\n"]))
    body = nl.join(lines) + (nl if draw(st.booleans()) else "")
    if draw(st.integers(0, 3)) == 0:  # plant an unusual line break somewhere
        at = draw(st.integers(0, len(body)))
        body = body[:at] + draw(BREAKS) + body[at:]
    return (b"\xef\xbb\xbf" if draw(st.booleans()) else b"") + body.encode()


def _json_value(draw):
    return draw(
        st.one_of(
            st.sampled_from(
                [
                    *(True, False, None, "auto", "3", 1e9, 0, -1, 0.5, "cpu", "CPU", [], {}),
                    # issue 26: not numbers, too large, and strings with surrogates, separators, escapes
                    *(float("nan"), float("inf"), -float("inf"), 10**40, "\ud800", "a\u2028b", "x\x85y", "\x1b[31m"),
                    # issue 34: unicode digits as DeepSpeed strings (`"stage": "²"`)
                    *("²", "٣", "1²"),
                ]
            ),
            st.integers(0, 10**9),
        )
    )


@st.composite
def json_documents(draw) -> bytes:
    zero = {
        mutate_key(draw(st.sampled_from(ZERO_KEYS)), draw): _json_value(draw) for _ in range(draw(st.integers(0, 6)))
    }
    doc = {mutate_key(draw(st.sampled_from(DS_KEYS)), draw): _json_value(draw) for _ in range(draw(st.integers(0, 6)))}
    doc["zero_optimization"] = zero
    text = json.dumps(doc, indent=draw(st.sampled_from([None, 2, 4])))
    if draw(st.booleans()):  # duplicate a member
        text = text.replace("{", '{"gradient_clipping": 1.0, "gradient_clipping": "auto", ', 1)
    if draw(st.integers(0, 4)) == 0:  # issue 26: a key no encoder can write as UTF-8, control characters in keys
        text = text.replace("{", '{"\\ud800": 1, "a\\nb:1:1: error X": 2, ', 1)
    if draw(st.booleans()):
        text = text.replace("\n", "\r\n")
    return text.encode("utf-8", "surrogatepass")


CLI_KEYS = [*LF_KEYS[:200], "bf16", "fp16", "compute_type", "flash_attn", "output_dir", "learning_rate"]
CLI_VALUES = st.sampled_from(
    [
        *("True", "true", "fa2", "1e-4", "out_$(date +%s)", "`date +%s`", "$LR", '"a b"', "'x y'", "${X:-1}", "2"),
        # issue 26: words with parentheses the shell balances, and expansions that may be any number of arguments
        *("$((RANDOM % 100))", "$( (echo 1) )", "$(case $X in a) echo 1;; esac)", '"$@"', "$ARGS", '"$1"'),
        *("²", "٣"),  # issue 34: unicode digits
    ]
)
# issue 26 / 24: where a command may start (indented, after do/then, behind nohup/time/env), and launch shapes
WRAPPERS = st.sampled_from(
    [
        ("", ""),
        ("  ", ""),
        ("for i in 1 2; do ", "; done"),
        ("if true; then\n    ", "\nfi"),
        ("nohup ", " &"),
        ("time -p ", ""),
        ("env A=1 CUDA_VISIBLE_DEVICES=0,1 ", ""),
        ("CUDA_VISIBLE_DEVICES=0,² ", ""),  # issue 34: a unicode digit in a device list
        ("run() {\n  ", "\n}"),
    ]
)
LAUNCHERS = st.sampled_from(
    [
        "llamafactory-cli train",
        "deepspeed --num_gpus 2 src/train.py --stage sft",
        "torchrun --nproc_per_node 4 src/train.py --stage sft",
        "torchrun --nproc_per_node ² src/train.py --stage sft",  # issue 34: isdigit() but no int()
        "python src/train_bash.py --stage sft",
        "accelerate launch --num_processes 2 src/train.py --stage sft",
    ]
)
# Fragments that must come out of any fix byte for byte: data written elsewhere, and strings the shell keeps.
PROTECTED = st.sampled_from(
    [
        "cat > gen.yaml <<EOF\nmodel_name_or_path: m\nlogging_steps: 10  # cfgopt: ignore[LF003]\nEOF\n",
        "cat <<-'END' > run2.sh\n\tllamafactory-cli train --bf_16 True\n\tEND\n",
        'python -c "\n# cfgopt: ignore[LF001]\nprint(1)"\n',
        "echo 'multi\nline # cfgopt: ignore' $(date +%s)\n",
        "X=$(echo \"$(date)\" | tr -d ')') # a note\n",
    ]
)


@st.composite
def script_documents(draw) -> tuple[bytes, list[str]]:
    """A training script: `llamafactory-cli train` lines with mutated `--key value` arguments, continuations,
    command substitutions and suppressions, around fragments (heredocs, multi-line strings) a fix must keep."""
    out: list[str] = ["#!/bin/bash\n"]
    kept: list[str] = []
    for _ in range(draw(st.integers(1, 3))):
        if draw(st.booleans()):
            fragment = draw(PROTECTED)
            kept.append(fragment)
            out.append(fragment)
        args = ["--model_name_or_path m", "--stage sft"] if draw(st.booleans()) else []
        for _ in range(draw(st.integers(0, 6))):
            key = mutate_key(draw(st.sampled_from(CLI_KEYS)), draw)
            args.append(f"--{key}" if draw(st.integers(0, 4)) == 0 else f"--{key} {draw(CLI_VALUES)}")
        sep = draw(st.sampled_from([" ", " \\\n    "]))
        tail = draw(st.sampled_from(["", " 2>&1 | tee log", " # cfgopt: ignore[LF001]", " > out.log", ")"]))
        prefix = draw(st.sampled_from(["", "FORCE_TORCHRUN=1 ", "( ", "time "]))
        before, after = draw(WRAPPERS) if tail != ")" else ("", "")
        launch = draw(LAUNCHERS)
        out.append(before + prefix + launch + "".join(sep + a for a in args) + tail + after + "\n")
    text = "".join(out)
    if draw(st.integers(0, 3)) == 0:
        text = text.rstrip("\n") + draw(st.sampled_from(["\\", "\\\r", "\r", ""]))
    return text.encode(), kept


REAL_CONFIGS = sorted(
    p.read_text(encoding="utf-8")
    for p in (ROOT / "fixtures").rglob("*.yaml")
    if "model_name_or_path" in p.read_text(encoding="utf-8", errors="replace")
)


@st.composite
def real_config_mutations(draw) -> bytes:
    """A LLaMA-Factory config from the fixtures with issue 18's shapes planted: an anchor shared by an alias,
    a tag, an explicit `? key` / `: value`, a suppression with a note, an unusual line break, no final newline."""
    lines = draw(st.sampled_from(REAL_CONFIGS)).splitlines()
    plain = [i for i, line in enumerate(lines) if re.match(r"^[a-z_]+: [^&!*|>'\"\[{#]+$", line)]
    for _ in range(draw(st.integers(1, 4))):
        if not plain:
            break
        i = draw(st.sampled_from(plain))
        key, _, value = lines[i].partition(": ")
        shape = draw(st.sampled_from(["anchor", "tag", "explicit", "note", "break", "dup"]))
        if shape == "anchor":
            lines[i] = f"{key}: &v{i} {value}"
            lines.append(f"{draw(st.sampled_from(['run_name', 'output_dir', 'logging_steps']))}: *v{i}")
        elif shape == "tag":
            lines[i] = f"{key}: {draw(st.sampled_from(['!!str', '!!int', '!!float']))} {value}"
        elif shape == "explicit":
            lines[i] = f"? {key}\n: {value}"
        elif shape == "note":
            lines[i] = f"{lines[i]}  # cfgopt: ignore[{draw(st.sampled_from(['LF003', 'LF001', 'PF002']))}] a note"
        elif shape == "break":
            lines[i] = lines[i] + draw(BREAKS) + "# planted"
        else:
            lines.append(f"{draw(st.sampled_from(['bf16', 'compute_type', 'fp16']))}: true")
    text = "\n".join(lines) + ("\n" if draw(st.booleans()) else "")
    return text.encode()


def check_loaders(raw: bytes) -> None:
    """Loaders and the span mapper never raise on any bytes: they return a source or an error."""
    try:
        doc = Document.from_bytes(Path("f"), raw)
    except DocumentError:
        return
    for src in (load_yaml(doc), load_json(doc), *find_commands(doc)):
        for entry in src.walk():
            assert 0 <= entry.key_start <= entry.key_end <= len(doc.text)
            assert entry.node.start <= entry.node.end <= len(doc.text)


JUDGED: Counter[str] = Counter()  # how many inputs `judge_fix` saw fixed (for the long run's report)
_BATCH_PAIR = ("per_device_train_batch_size", "gradient_accumulation_steps")


def _flat(value, prefix: str = "") -> dict[str, object]:
    if isinstance(value, dict) and value:
        out: dict[str, object] = {}
        for key, item in value.items():
            out.update(_flat(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    if isinstance(value, list) and value:
        out = {}
        for i, item in enumerate(value):
            out.update(_flat(item, f"{prefix}[{i}]"))
        return out
    return {prefix: (type(value).__name__, repr(value))}


def _real_load(name: str, data: bytes):
    """The file as its real consumer loads it: OmegaConf.load for YAML (LLaMA-Factory), json.loads refusing
    duplicate keys for JSON (the `deepspeed` launcher), `bash -n` for scripts. Raises when it is refused."""
    import subprocess

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_bytes(data)
        if name.endswith(".json"):

            def no_duplicates(pairs):
                keys = [k for k, _ in pairs]
                if len(keys) != len(set(keys)):
                    raise ValueError("duplicate key")
                return dict(pairs)

            return json.loads(data.decode("utf-8-sig"), object_pairs_hook=no_duplicates)
        if name.endswith(".sh"):
            if subprocess.run(["bash", "-n", str(path)], capture_output=True, timeout=120).returncode:
                raise ValueError("bash -n refuses it")
            return None
        from omegaconf import OmegaConf

        return OmegaConf.to_container(OmegaConf.load(path))


_PLAN_KEYS = (
    *_BATCH_PAIR,
    "disable_gradient_checkpointing",
    "flash_attn",
    "packing",
    "enable_liger_kernel",
    "bf16",
    "fp16",
    "pure_bf16",
    "optim",
    "deepspeed",
)


def _named(keys: list[str], descriptions: list[str]) -> set[str]:
    """The keys the applied fixes name: each fix's own key, and the keys written in its description."""
    named = {k for k in keys if k}
    for text in descriptions:
        named.update(m.split(":")[0].strip().lstrip("-") for m in re.findall(r"`([^`]+)`", text))
        named.update(re.findall(r'"([A-Za-z_][\w.]*)"', text))
        named.update(re.findall(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b|\b(?:bf16|fp16|fp32|tf32)\b", text))
        if re.search(r"Use \d+ x \d+", text):
            named.update(_BATCH_PAIR)
        if "Speed plan for" in text:  # the plan writes the knobs' keys (plan/space.py changed_keys)
            named.update(_PLAN_KEYS)
    return named


def judge_fix(name: str, raw: bytes, unsafe: bool, kept: list[str] | None = None) -> list[str]:
    """Issue 18's verdicts on `cfgopt fix` of one file, by the real loaders, independent of cfgopt's own
    checks: "rejected" (the consumer refuses the fixed file but took the original), "damaged" (a value changed
    that no applied fix names, or a protected fragment changed)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_bytes(raw)
        result = fix_paths([path], Settings(unsafe_fixes=unsafe))
        key = Path(tmp).resolve() / name
        fixed = result.fixed.get(key)
        if fixed is None:
            return []
        JUDGED["fixed"] += 1
        bom = b"\xef\xbb\xbf" if raw.startswith(b"\xef\xbb\xbf") else b""
        after_raw = bom + fixed.encode()
        verdicts = []
        for fragment in kept or ():
            if fragment not in fixed:
                verdicts.append(f"damaged: protected text changed: {fragment!r}")
        try:
            before = _real_load(name, raw)
        except Exception:  # noqa: BLE001 - the original is refused: nothing to compare against
            return verdicts
        try:
            after = _real_load(name, after_raw)
        except Exception as exc:  # noqa: BLE001
            return [*verdicts, f"rejected: {type(exc).__name__}: {exc}"]
        if before is None:
            return verdicts
        old, new = _flat(before), _flat(after)
        named = _named(getattr(result, "applied_keys", {}).get(key, []), result.applied.get(key, []))
        for path_ in sorted(set(old) | set(new)):
            if old.get(path_) == new.get(path_):
                continue
            leaf = path_.rsplit(".", 1)[-1]
            whole = path_.split("[", 1)[0]  # an item of a list whose whole value a fix replaced
            related = (
                path_ == n or leaf == n or whole == n or path_.startswith(n + ".") or n.startswith(path_ + ".")
                for n in named
            )
            if not any(related):
                verdicts.append(f"damaged: `{path_}` changed, no fix names it ({result.applied.get(key)})")
        return verdicts


def check_fix(name: str, raw: bytes, unsafe: bool) -> None:
    """No internal error; fix converges (idempotent), leaves nothing applicable, never breaks parsing."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_bytes(raw)
        settings = Settings(unsafe_fixes=unsafe)
        project = build_project([path], settings)
        project.diagnostics()
        assert not [p for p in project.problems if "internal error" in p.message], project.problems
        first = fix_paths([path], settings)
        assert not [p for p in first.problems if "internal error" in p.message]
        assert not first.reverted, first.reverted
        fixed = first.fixed.get(Path(tmp).resolve() / name)
        if fixed is None:
            return
        bom = b"\xef\xbb\xbf" if raw.startswith(b"\xef\xbb\xbf") else b""
        path.write_bytes(bom + fixed.encode())
        second = fix_paths([path], settings)
        assert not second.fixed, "fix is not idempotent"
        left = [
            d
            for d in second.remaining
            if d.fix is not None
            and (unsafe or d.fix.applicability.value == "safe")
            and not any(w.code == d.code and w.key == d.key for w in second.withheld.values())
        ]
        assert not left, [(d.code, d.message) for d in left]
    verdicts = judge_fix(name, raw, unsafe)
    assert not verdicts, verdicts


def check_script(case: tuple[bytes, list[str]], unsafe: bool) -> None:
    """Lint and fix of a training script: no internal error, the fixed script still parses (`bash -n`),
    heredocs and multi-line strings kept byte for byte, and a second fix changes nothing."""
    raw, kept = case
    check_loaders(raw)
    verdicts = judge_fix("run.sh", raw, unsafe, kept)
    assert not verdicts, verdicts
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "run.sh"
        path.write_bytes(raw)
        first = fix_paths([path], Settings(unsafe_fixes=unsafe))
        assert not [p for p in first.problems if "internal error" in p.message], first.problems
        fixed = first.fixed.get(Path(tmp).resolve() / "run.sh")
        if fixed is not None:
            path.write_bytes(fixed.encode())
            assert not fix_paths([path], Settings(unsafe_fixes=unsafe)).fixed, "fix is not idempotent"


def _is_utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


# issue 34: the outputs of `fix -`, `fix` and `lint` on a terminal that is not UTF-8 (an editor's latin-1 locale)
OUTPUT_ENCODINGS = st.sampled_from(["ascii", "latin-1", "cp1252", "utf-8"])


def check_outputs(name: str, raw: bytes, encoding: str) -> None:
    """`fix -`, `fix` and `lint` with stdout and stderr in `encoding`: no traceback, an exit code of 0, 1 or 2,
    and `fix -` gives the file's own bytes (UTF-8), the input's when it exits 2 or changes nothing (bytes that are
    not UTF-8, a JSON key with a lone surrogate: echoed as read, exit 2)."""
    import contextlib
    import io
    import os
    import sys

    from cfgopt.cli import main

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / name).write_bytes(raw)
        here = os.getcwd()
        saved = sys.stdin, sys.stdout, sys.stderr
        try:
            os.chdir(tmp)
            for argv in (["fix", "-", "--stdin-filename", name], ["fix", name], ["lint", name]):
                out = io.BytesIO()
                sys.stdin = io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8")
                sys.stdout = io.TextIOWrapper(out, encoding=encoding, write_through=True)
                sys.stderr = io.TextIOWrapper(io.BytesIO(), encoding=encoding, write_through=True)
                code = 2
                with contextlib.suppress(SystemExit):  # a usage error exits 2 through argparse
                    code = main(argv)
                    assert code in (0, 1, 2), argv
                sys.stdout.flush()
                if argv[1] == "-" and _is_utf8(raw):
                    out.getvalue().decode("utf-8")  # the file's own bytes, never re-encoded
                elif argv[1] == "-":
                    assert (code, out.getvalue()) == (2, raw), argv  # not UTF-8: echoed as read, never dropped
        finally:
            sys.stdin, sys.stdout, sys.stderr = saved
            os.chdir(here)
