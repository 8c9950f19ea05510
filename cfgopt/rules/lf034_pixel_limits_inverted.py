from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind


class PixelLimitsInverted(Rule):
    code = "LF034"
    name = "pixel-limits-inverted"
    severity = Severity.ERROR
    kinds = frozenset({Kind.LF_TRAIN, Kind.LF_INFER, Kind.LF_CLI})
    triggers = frozenset({"image_max_pixels", "image_min_pixels", "video_max_pixels", "video_min_pixels"})
    summary = "`image_max_pixels` / `video_max_pixels` smaller than the matching minimum"
    why = (
        "Confidence: certain. LLaMA-Factory's ModelArguments refuse a maximum below the minimum (defaults: images "
        "32x32..768x768, videos 16x16..256x256), for every model, multimodal or not."
    )
    fails_when = "At start-up: `image_max_pixels cannot be smaller than image_min_pixels` (or video)."
    evidence = ("llamafactory 0.9.5 hparams/model_args.py `ProcessorArguments.__post_init__`",)
    example = "video_max_pixels: 100   ->  at least video_min_pixels (256 by default)"

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        if src.root is None:
            return
        data = src.data if isinstance(src.data, dict) else {}
        fields = ctx.settings.lf_schema.fields
        for kind in ("image", "video"):
            high_key, low_key = f"{kind}_max_pixels", f"{kind}_min_pixels"
            if high_key not in data and low_key not in data:
                continue
            high = data.get(high_key, fields[high_key].default if high_key in fields else None)
            low = data.get(low_key, fields[low_key].default if low_key in fields else None)
            if not all(isinstance(v, (int, float)) for v in (high, low)):
                continue  # LF002 reports other types
            if high < low:
                entry = src.root.get(high_key) or src.root.get(low_key)
                yield self.at_entry(
                    ctx,
                    entry,
                    f"`{high_key}` ({high}) is smaller than `{low_key}` ({low}): "
                    f"LLaMA-Factory stops at start-up with `{high_key} cannot be smaller than "
                    f"{low_key}`",
                    on="value",
                )
