"""Properties of `cfgopt fix` over generated broken configs (hypothesis).

For a clean config with random comments, quoting, CRLF/BOM and injected mistakes:
- fix(fix(x)) == fix(x) (idempotent), and nothing fixable remains;
- every line of the clean config survives byte-identical and in order (JSON: up to the comma that
  separates members), so comments, key order, number spelling and line endings are kept.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rule_cases import ROOT

from cfgopt.job.settings import Settings
from cfgopt.lint.fixer import fix_paths

EXAMPLES = int(os.environ.get("CFGOPT_PROPERTY_EXAMPLES", "150"))
CLEAN_YAML = (
    (ROOT / "fixtures" / "clean" / "llama3_lora_sft.yaml").read_text().replace("deepspeed: ds_z2_config.json\n", "")
)
CLEAN_JSON = (ROOT / "fixtures" / "clean" / "ds_z2_config.json").read_text()

BAD_YAML_LINES = [
    "compute_type: bf16",
    "compute_type: fp16",
    "disable_torch_compile: true",
    "disable_torch_compile: false",
    "flash_attn: true",
    "flash_attn: Fa",
    "flash_attn: FA2",
    "flash_attn: off",
    "evaluation_strategy: steps",
    "quantization_method: bitsandbytes",
    "lora_rnak: 8",
    'save_steps: "500"',
    'max_samples: "1000"',
    "optim: AdamW_Torch",
    "lr_scheduler_type: Cosine",
    "ax_samples: 1000",
    'plot_loss: "true"',
]
BAD_ZERO_MEMBERS = ['"stage3_parition_grads": true', '"overlap_com": true', '"mics_shard_size": 4']
BAD_TOP_MEMBERS = ['"gradient_cliping": 1.0', '"steps_per_print": "10"', '"amp": {"enabled": true}']
COMMENTS = ["", "  # keep me", "  # lr: 1e-4 (blog)", "\t# tab comment"]


def _fix_twice(name: str, data: bytes, unsafe: bool) -> tuple[bytes, bytes, list]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_bytes(data)
        # The speed plan rewrites the clean config's batch lines on purpose (same global batch): without the
        # rules that own the micro-batch knob (cfgopt.plan.speed_knobs.OWNERS) it leaves them alone
        cfg = Settings(unsafe_fixes=unsafe, ignore=["MEM005", "PF007", "MEM001"])
        first = fix_paths([path], cfg)
        once = first.fixed.get(path.resolve())
        once_bytes = (
            data if once is None else (b"\xef\xbb\xbf" if data.startswith(b"\xef\xbb\xbf") else b"") + once.encode()
        )
        path.write_bytes(once_bytes)
        second = fix_paths([path], cfg)
        twice = second.fixed.get(path.resolve())
        assert twice is None, "a second fix pass changed the file again"
        return once_bytes, once_bytes, second.remaining


@st.composite
def yaml_case(draw):
    lines = CLEAN_YAML.splitlines()
    base = [line + (draw(st.sampled_from(COMMENTS)) if line and not line.startswith("#") else "") for line in lines]
    bad = draw(st.lists(st.sampled_from(BAD_YAML_LINES), max_size=5, unique=True))
    # one injected key must not repeat a key the base already has (that would be a duplicate-key case)
    keys = {line.split(":")[0] for line in base}
    bad = [
        b
        for b in bad
        if b.split(":")[0] not in keys and not any(b.split(":")[0] == o.split(":")[0] for o in bad if o is not b)
    ]
    out = list(base)
    for b in bad:
        out.insert(draw(st.integers(0, len(out))), b)
    nl = draw(st.sampled_from(["\n", "\r\n"]))
    bom = draw(st.booleans())
    text = nl.join(out) + (nl if draw(st.booleans()) else "")
    return base, text, nl, bom


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(yaml_case(), st.booleans())
def test_yaml_fix_keeps_untouched_lines(case, unsafe) -> None:
    base, text, nl, bom = case
    data = (b"\xef\xbb\xbf" if bom else b"") + text.encode()
    fixed, _, remaining = _fix_twice("cfg.yaml", data, unsafe)
    assert fixed.startswith(b"\xef\xbb\xbf") == bom
    body = fixed.decode("utf-8-sig")
    if nl == "\r\n":
        assert "\n" not in body.replace("\r\n", "")
    out_lines = body.split(nl)
    it = iter(out_lines)
    for line in base:  # in order, byte-identical
        assert any(line == candidate for candidate in it), f"lost or changed: {line!r}"
    assert not [
        d
        for d in remaining
        if d.fix is not None and d.fix.applicability.value in (("safe", "unsafe") if unsafe else ("safe",))
    ]


@st.composite
def json_case(draw):
    lines = CLEAN_JSON.splitlines()
    zero_at = next(i for i, line in enumerate(lines) if '"stage": 2' in line)
    bad_zero = draw(st.lists(st.sampled_from(BAD_ZERO_MEMBERS), max_size=3, unique=True))
    bad_top = draw(st.lists(st.sampled_from(BAD_TOP_MEMBERS), max_size=3, unique=True))
    out = list(lines)
    for member in bad_zero:
        out.insert(zero_at + 1, f"    {member},")
    for member in bad_top:
        out.insert(1, f"  {member},")
    nl = draw(st.sampled_from(["\n", "\r\n"]))
    return lines, nl.join(out) + nl, nl


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_case(), st.booleans())
def test_json_fix_keeps_untouched_lines(case, unsafe) -> None:
    base, text, nl = case
    fixed, _, remaining = _fix_twice("ds.json", text.encode(), unsafe)
    body = fixed.decode()
    if nl == "\r\n":
        assert "\n" not in body.replace("\r\n", "")
    it = iter(line.rstrip(",") for line in body.split(nl))
    for line in base:
        assert any(line.rstrip(",") == candidate for candidate in it), f"lost or changed: {line!r}"
    assert not [
        d
        for d in remaining
        if d.fix is not None and d.fix.applicability.value in (("safe", "unsafe") if unsafe else ("safe",))
    ]
