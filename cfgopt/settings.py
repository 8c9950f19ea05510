"""Run settings: the target hardware, GPU count, rule selection and fix options."""

from __future__ import annotations

from dataclasses import dataclass, field

from cfgopt.diagnostics import Severity
from cfgopt.schema import (
    DEEPSPEED_VERSION,
    LLAMAFACTORY_VERSION,
    DeepSpeedSchema,
    LlamaFactorySchema,
    deepspeed,
    llamafactory,
)
from cfgopt.targets import DEFAULT_TARGET, TARGETS, Target


@dataclass
class Settings:
    target_name: str = DEFAULT_TARGET
    gpus: int | None = None  # None: not stated; rules that need it check every plausible count
    select: list[str] = field(default_factory=list)  # codes or prefixes; empty = all
    ignore: list[str] = field(default_factory=list)
    fail_on: Severity = Severity.WARNING
    unsafe_fixes: bool = False
    # Which versions' schemas judge the files (cfgopt/schemas/<package>-<version>.json).
    llamafactory_version: str = LLAMAFACTORY_VERSION
    deepspeed_version: str = DEEPSPEED_VERSION

    @property
    def lf_schema(self) -> LlamaFactorySchema:
        return llamafactory(self.llamafactory_version)

    @property
    def ds_schema(self) -> DeepSpeedSchema:
        return deepspeed(self.deepspeed_version)

    @property
    def target(self) -> Target:
        return TARGETS[self.target_name]

    def is_selected(self, code: str) -> bool:
        """Longest matching prefix wins, as in ruff: `--select DS --ignore DS0` keeps DS1xx only;
        on a tie the ignore wins."""

        def best(prefixes: list[str]) -> int:
            return max((len(p) for p in prefixes if code.startswith(p) or p == "ALL"), default=-1)

        selected = best(self.select) if self.select else 0
        ignored = best(self.ignore)
        return selected >= 0 and (ignored < 0 or selected > ignored)
