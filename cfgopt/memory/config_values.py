"""The config's values as the memory model reads them. The dict holds what LLaMA-Factory sees, every default filled
in by the job model (`cfgopt.job.job.Job.values`), so nothing here knows a default; a count of the wrong type or
beyond `MAX_COUNT` reads as None, and the model does not count with it.
"""

from __future__ import annotations

from cfgopt.text.user_text import is_int

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def get(config: dict[str, Any], key: str) -> Any:
    """`config` holds the values LLaMA-Factory sees, defaults included (`cfgopt.job.job.lf_values`): no default here."""
    return config.get(key)


# The largest count (batch size, sequence length, rank, layers...) the arithmetic accepts: beyond it a product of
# counts could leave the float range (a YAML `1e300` or a 400-digit integer), and no real run comes near it.
MAX_COUNT = 2**31 - 1


def integer_at(config: dict[str, Any], key: str) -> int | None:
    """An integer value (an integral float counts), None for anything else: a bool, a list, NaN, an infinity, or
    a number beyond +-MAX_COUNT, which the model does not count with."""
    value = get(config, key)
    if isinstance(value, float):
        value = int(value) if value.is_integer() else None  # NaN and the infinities are not integers
    if is_int(value) and -MAX_COUNT <= value <= MAX_COUNT:
        return value
    return None


def split_names(value: Any) -> list[str]:
    if value is None:
        return []
    parts = value if isinstance(value, (list, tuple)) else str(value).split(",")
    return [str(p).strip() for p in parts if str(p).strip()]


def attention_of(config: dict[str, Any]) -> str:
    """The attention implementation counted; a value that is not a string (`[fa2]`, a number) is refused by
    LLaMA-Factory's choices (LF002/LF003 say so) and counted as its default, SDPA."""
    value = get(config, "flash_attn")
    if not isinstance(value, str):
        return "sdpa"
    return {"disabled": "eager", "auto": "sdpa", "fa3": "fa2"}.get(value, value if value in ("sdpa", "fa2") else "sdpa")


def gradient_checkpointing_on(config: dict[str, Any]) -> bool:
    return get(config, "disable_gradient_checkpointing") is not True


def short_repr(value: Any) -> str:
    """A config value for a message: its repr, cut short (a hostile value may be a 400-digit integer)."""
    try:
        text = repr(value)
    except ValueError:  # an integer beyond Python's digit limit for str()
        return f"an integer of about {value.bit_length() * 0.30103:.0f} digits"
    return text if len(text) <= 40 else text[:37] + "..."
