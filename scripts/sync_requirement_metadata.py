#!/usr/bin/env python3
"""Refresh cfgopt/knowledge/schemas/requirement-metadata.json: what each listed release of the fine-tuning stack
requires of other packages (its `Requires-Dist` on PyPI), for ENV005 (pins that cannot be installed together).

Usage: `python scripts/sync_requirement_metadata.py [PACKAGE==VERSION ...]` (default: RELEASES below). Each
release's metadata is read with pip itself (`pip install --dry-run --no-deps --ignore-installed --report`: the
wheel's metadata file, not the wheel), never at lint time. A requirement is kept only where it holds on the
platform the snapshot assumes (Linux x86_64, CPython 3.10, 3.11 and 3.12 alike) and needs no extra; `nvidia-*`
requirements are left out (they differ between the CUDA builds of one torch release).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

try:
    from packaging.requirements import Requirement
except ImportError:  # pip's own copy
    from pip._vendor.packaging.requirements import Requirement

OUT = Path(__file__).resolve().parent.parent / "cfgopt" / "knowledge" / "schemas" / "requirement-metadata.json"
PYTHONS = ("3.10", "3.11", "3.12")
ASSUMED = "Linux x86_64, CPython 3.10, 3.11 and 3.12"
RELEASES = [
    *(f"torch=={v}" for v in ("2.3.1", "2.4.0", "2.4.1", "2.5.0", "2.5.1", "2.6.0", "2.7.0", "2.7.1", "2.8.0")),
    "datasets==3.5.0",
    "datasets==3.6.0",
    "gradio-client==1.0.1",
    "vllm==0.6.3",
    "vllm==0.7.3",
    "vllm==0.8.5",
]


def normalise(name: str) -> str:
    return name.replace("-", "_").replace(".", "_").lower()


def environments() -> list[dict[str, str]]:
    return [
        {
            "python_version": v,
            "python_full_version": f"{v}.0",
            "platform_system": "Linux",
            "platform_machine": "x86_64",
            "sys_platform": "linux",
            "os_name": "posix",
            "implementation_name": "cpython",
            "platform_python_implementation": "CPython",
            "extra": "",
        }
        for v in PYTHONS
    ]


def requirements(release: str) -> tuple[str, str, dict[str, str]]:
    """(name, version, {required package: specifier}) of one release, as its metadata states them."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        command = [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--ignore-installed", "--quiet"]
        subprocess.run([*command, "--report", str(report), release], check=True, capture_output=True)
        metadata = json.loads(report.read_text())["install"][0]["metadata"]
    found: dict[str, list[str]] = {}
    for line in metadata.get("requires_dist", []):
        req = Requirement(line)
        if req.marker is not None and not all(req.marker.evaluate(env) for env in environments()):
            continue
        name = normalise(req.name)
        if not name.startswith("nvidia_") and str(req.specifier):
            found.setdefault(name, []).append(str(req.specifier))
    return normalise(metadata["name"]), metadata["version"], {k: ",".join(v) for k, v in sorted(found.items())}


def main(argv: list[str]) -> int:
    data = json.loads(OUT.read_text()) if OUT.exists() else {"packages": {}}
    data["assumed"] = ASSUMED
    data["source"] = "PyPI metadata (Requires-Dist), read by scripts/sync_requirement_metadata.py"
    for release in argv or RELEASES:
        name, version, required = requirements(release)
        data["packages"].setdefault(name, {})[version] = required
        print(f"{name} {version}: {len(required)} requirements")
    data["packages"] = {k: dict(sorted(v.items())) for k, v in sorted(data["packages"].items())}
    OUT.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
