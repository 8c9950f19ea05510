from __future__ import annotations

from collections.abc import Iterator

from cfgopt.knowledge import requirement_pins as pins
from cfgopt.knowledge.versions import VersionRange
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.requirements import TORCH_FAMILY
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.requirements.versions import final_release, numeric_spec
from cfgopt.text.source import Kind


class PinsCannotInstallTogether(Rule):
    code = "ENV005"
    name = "pins-cannot-install-together"
    severity = Severity.ERROR
    kinds = frozenset({Kind.REQUIREMENTS})
    summary = "Two exact pins of one requirement file that pip cannot install together: nothing is installed"
    why = (
        "Confidence: certain (the releases' own metadata). A release states what it requires of other packages "
        "(`Requires-Dist`: torch 2.5.1 requires triton==3.1.0 on Linux x86_64, datasets 3.5.0 tqdm>=4.66.3, "
        "gradio-client 1.0.1 websockets>=10.0,<12.0, vllm 0.6.3 torch==2.4.0). When the file pins both at exact "
        "versions that do not agree, pip's resolver stops with `ResolutionImpossible` before installing anything, "
        "and the job never starts. Judged from a snapshot of the releases' metadata in the repository "
        "(cfgopt/knowledge/schemas/requirement-metadata.json, refreshed by scripts/sync_requirement_metadata.py), "
        "for the platform it assumes (Linux x86_64, CPython 3.10-3.12): only requirements that hold there for "
        "every one of those Pythons, on exact pins of final releases; a pin with a local build (`+cu121`) and "
        "the torch family in a file naming another index (whose builds state other requirements) are not judged."
    )
    fails_when = (
        "At `pip install -r`: `ERROR: Cannot install datasets==3.5.0 and tqdm==4.65.2 because these package "
        "versions have conflicting dependencies` (`ResolutionImpossible`)."
    )
    evidence = (
        "PyPI metadata (Requires-Dist) of torch 2.3.1-2.8.0, datasets 3.5.0 / 3.6.0, gradio-client 1.0.1, vllm "
        "0.6.3 / 0.7.3 / 0.8.5, read by scripts/sync_requirement_metadata.py with `pip install --dry-run --no-deps "
        "--report`",
        "reproduced with pip 23.2: `pip install --dry-run datasets==3.5.0 tqdm==4.65.2` stops with "
        "ResolutionImpossible",
    )
    example = "torch==2.5.1 + triton==3.2.0   # torch 2.5.1 requires triton==3.1.0"
    fix_safety = "No fix: which of the two pins should move is the user's choice."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        if src.root is None:
            return
        exact = {e.key: (e, v) for e in src.root.entries or () if (v := final_release(str(e.node.value)))}
        other_index = bool(src.command.get("indexes"))
        assumed, _ = pins.requirement_metadata()
        for package, (entry, version) in exact.items():
            if other_index and package in TORCH_FAMILY:
                continue  # another index's torch builds state other requirements (pytorch-triton-rocm, ...)
            for required, spec in (pins.requires(package, version) or {}).items():
                pinned = exact.get(required)
                if pinned is None or not numeric_spec(spec):
                    continue
                if VersionRange(required, spec, "").admits(pinned[1]):
                    continue
                yield self.at_entry(
                    ctx,
                    pinned[0],
                    f"`{_shown(required)}=={pinned[1]}` cannot be installed with `{_shown(package)}=={version}` (line "
                    f"{src.document.position(entry.key_start)[0]}), which requires {_shown(required)}{spec} (its "
                    f"PyPI metadata, on {assumed}): pip stops with `ResolutionImpossible` and installs nothing",
                    on="value",
                )


def _shown(name: str) -> str:
    return name.replace("_", "-")
