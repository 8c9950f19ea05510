#!/usr/bin/env python
"""Snapshot what the installed DeepSpeed's config reader does with a top-level block that is not an object:
cfgopt/knowledge/schemas/ds-section-values.json, read by DS027 (not named `deepspeed-*.json`: that prefix lists the
release snapshots).

Why this exists: `DeepSpeedConfig(...)` reads most top-level blocks as objects, each in its own way (`**block`,
`block.get(...)`, `block.keys()`, a pydantic model), so `"tensorboard": null` or `"bf16": true` stops the run at
`deepspeed.initialize`, after the model is loaded and the data tokenised, with an error that differs per block.
Reading each reader's code is error-prone; running it is exact. For every top-level key of the release's snapshot
(`top_level_keys`), with `{"train_micro_batch_size_per_gpu": 1}` around it: the block as `{}` must be accepted (a
block removed from the release, which any value fails, is DS004's and left out); then each value kind (null, true,
false, an integer, a float, a string, a list) is tried, and the exception of each kind that fails is recorded
(type and first line) for the blocks that reject an integer (a number key such as `vocabulary_size` is DS005's).
Nothing is judged by hand.

Usage::

    python scripts/probe_ds_sections.py          # the installed deepspeed: its entry in the file is replaced
    # an older release (its config reader is pure Python: the installed torch serves), entries merged:
    DS_BUILD_OPS=0 pip install --no-deps --no-build-isolation --target /tmp/ds deepspeed==0.16.4
    PYTHONPATH=/tmp/ds python scripts/probe_ds_sections.py
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "cfgopt" / "knowledge" / "schemas" / "ds-section-values.json"
KINDS = {"null": None, "true": True, "false": False, "int": 1, "float": 1.5, "str": "x", "list": [1]}
BASE = {"train_micro_batch_size_per_gpu": 1}


def _fails(config_class, key: str, value: object) -> str | None:
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            config_class({**BASE, key: value})
    except Exception as exc:  # noqa: BLE001 - what the real reader raises is the finding
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return f"{type(exc).__name__}: {first}"[:160]
    return None


def probe() -> tuple[str, dict[str, dict[str, str]]]:
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    import deepspeed
    from deepspeed.runtime.config import DeepSpeedConfig

    version = deepspeed.__version__.split("+")[0]
    snapshot = json.loads((OUT.parent / f"deepspeed-{version}.json").read_text(encoding="utf-8"))
    sections: dict[str, dict[str, str]] = {}
    for key in sorted(snapshot["top_level_keys"]):
        if key in BASE or _fails(DeepSpeedConfig, key, {}) is not None:
            continue
        failing = {kind: why for kind, value in KINDS.items() if (why := _fails(DeepSpeedConfig, key, value))}
        if "int" in failing:  # a block: a number key (`vocabulary_size`) takes an integer and is DS005's
            sections[key] = failing
    return version, sections


def main() -> int:
    version, sections = probe()
    data = json.loads(OUT.read_text(encoding="utf-8")) if OUT.exists() else {}
    data[version] = {
        "source": f"scripts/probe_ds_sections.py: DeepSpeedConfig of deepspeed {version} on each value kind",
        "sections": sections,
    }
    OUT.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"{OUT.relative_to(ROOT)}: deepspeed {version}, {len(sections)} blocks fail on a value that is not an object")
    return 0


if __name__ == "__main__":
    sys.exit(main())
