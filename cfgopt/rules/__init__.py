"""The built-in rules: one module per rule, listed here in code order. See docs/architecture.md."""

from __future__ import annotations

from functools import cache

from cfgopt.rules.base import Rule
from cfgopt.rules.cfg001_parse_error import ParseError
from cfgopt.rules.cfg002_duplicate_key import DuplicateKey
from cfgopt.rules.cfg003_unsupported_kind import UnsupportedKind
from cfgopt.rules.ds001_strict_section_unknown_key import StrictSectionUnknownKey
from cfgopt.rules.ds002_unknown_top_level_key import UnknownTopLevelKey
from cfgopt.rules.ds003_missing_zero_optimization import MissingZeroOptimization
from cfgopt.rules.ds004_removed_config_block import RemovedConfigBlock
from cfgopt.rules.ds005_invalid_value import InvalidValue
from cfgopt.rules.ds006_fp16_and_bf16_enabled import Fp16AndBf16Enabled
from cfgopt.rules.ds007_batch_size_arithmetic import BatchSizeArithmetic
from cfgopt.rules.ds008_zero3_weights_not_gathered import Zero3WeightsNotGathered
from cfgopt.rules.ds009_gds_needs_cuda import GdsNeedsCuda
from cfgopt.rules.lf001_unknown_key import UnknownKey
from cfgopt.rules.lf002_wrong_value_type import WrongValueType
from cfgopt.rules.lf003_invalid_choice import InvalidChoice
from cfgopt.rules.lf004_fp16_and_bf16 import Fp16AndBf16
from cfgopt.rules.lf005_deepspeed_config_not_found import DeepSpeedConfigNotFound
from cfgopt.rules.xf001_precision_mismatch import PrecisionMismatch
from cfgopt.rules.xf002_trainer_value_mismatch import TrainerValueMismatch

RULE_CLASSES: tuple[type[Rule], ...] = (
    ParseError,
    DuplicateKey,
    UnsupportedKind,
    UnknownKey,
    WrongValueType,
    InvalidChoice,
    Fp16AndBf16,
    DeepSpeedConfigNotFound,
    StrictSectionUnknownKey,
    UnknownTopLevelKey,
    MissingZeroOptimization,
    RemovedConfigBlock,
    InvalidValue,
    Fp16AndBf16Enabled,
    BatchSizeArithmetic,
    Zero3WeightsNotGathered,
    GdsNeedsCuda,
    PrecisionMismatch,
    TrainerValueMismatch,
)


@cache
def all_rules() -> tuple[Rule, ...]:
    return tuple(cls() for cls in RULE_CLASSES)


def by_code(code: str) -> Rule | None:
    wanted = code.upper()
    return next((r for r in all_rules() if r.code == wanted or r.name == code), None)
