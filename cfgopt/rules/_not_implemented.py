"""Candidate rules from the knowledge files that cfgopt does not implement, with the reason.

Rendered into docs/rules.md under "Not implemented" by scripts/gen_rule_docs.py. Each entry:
(candidate, where it was proposed, why it is not a rule (yet)). Two lists, one per area, so that
work on LLaMA-Factory rules and on DeepSpeed rules never edits the same lines.
"""

from __future__ import annotations

# LLaMA-Factory, ROCm/attention/data speed candidates (knowledge/llamafactory.md, rocm_perf.md)
NOT_IMPLEMENTED_LF: list[tuple[str, str, str]] = []

# DeepSpeed, ZeRO/offload/communication and cross-file candidates (knowledge/deepspeed.md, rocm_perf.md)
NOT_IMPLEMENTED_DS: list[tuple[str, str, str]] = []

NOT_IMPLEMENTED = NOT_IMPLEMENTED_LF + NOT_IMPLEMENTED_DS
