"""Fuzz targets shared by the short CI run (tests/test_fuzz.py) and the long run (scripts/fuzz_long.py)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import strategies as st

from cfgopt import schema
from cfgopt.document import Document, DocumentError
from cfgopt.engine import build_project
from cfgopt.fixer import fix_paths
from cfgopt.loaders.command_loader import find_commands
from cfgopt.loaders.json_loader import load_json
from cfgopt.loaders.yaml_loader import load_yaml
from cfgopt.settings import Settings

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
        ]
    ),
    st.integers(-5, 10**6).map(str),
    st.text(alphabet="abcxyz_-./ :#'\"", max_size=12),
)


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
        comment = draw(st.sampled_from(["", "  # c", " #x"]))
        lines.append(f"{key}: {draw(SCALARS)}{comment}")
    if draw(st.booleans()):
        lines.insert(draw(st.integers(0, len(lines))), draw(st.sampled_from(["# comment", "", "---", "  nested: 1"])))
    nl = draw(st.sampled_from(["\n", "\r\n"]))
    body = nl.join(lines) + (nl if draw(st.booleans()) else "")
    return (b"\xef\xbb\xbf" if draw(st.booleans()) else b"") + body.encode()


def _json_value(draw):
    return draw(
        st.one_of(
            st.sampled_from([True, False, None, "auto", "3", 1e9, 0, -1, 0.5, "cpu", "CPU", [], {}]),
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
    if draw(st.booleans()):
        text = text.replace("\n", "\r\n")
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
