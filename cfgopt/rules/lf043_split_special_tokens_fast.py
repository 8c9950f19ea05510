from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import entry_of, on
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.requirements.versions import version_key
from cfgopt.text.source import Kind

# The first release that accepts `split_special_tokens` with a fast tokenizer.
FIRST_ACCEPTING = (0, 9, 5)


class SplitSpecialTokensFast(Rule):
    code = "LF043"
    name = "split-special-tokens-fast"
    severity = Severity.ERROR
    kinds = frozenset({Kind.LF_TRAIN, Kind.LF_INFER, Kind.LF_CLI})
    triggers = frozenset({"split_special_tokens"})
    summary = "`split_special_tokens` with the fast tokenizer (the default) under LLaMA-Factory 0.9.0-0.9.4"
    why = (
        "Confidence: certain. ModelArguments of LLaMA-Factory 0.9.0-0.9.4 refuse `split_special_tokens: true` "
        "unless `use_fast_tokenizer: false`; `use_fast_tokenizer` defaults to true. 0.9.5 dropped the check."
    )
    fails_when = (
        "At start-up (ModelArguments.__post_init__): `split_special_tokens` is only supported for slow tokenizers."
    )
    evidence = (
        "llamafactory 0.9.4 hparams/model_args.py `__post_init__`",
        "confirmed with llamafactory 0.9.4 / transformers 4.57.1 (`get_train_args`)",
    )
    example = "split_special_tokens: true   ->  add use_fast_tokenizer: false"
    fix_safety = "No fix: the slow tokenizer is much slower; the user decides."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        version = ctx.settings.lf_schema.version
        if version_key(version)[:3] >= FIRST_ACCEPTING or not on(ctx, "split_special_tokens"):
            return
        if not on(ctx, "use_fast_tokenizer"):
            return
        entry = entry_of(ctx, "split_special_tokens")
        if entry is not None:
            yield self.at_entry(
                ctx,
                entry,
                f"`split_special_tokens` needs `use_fast_tokenizer: false` in LLaMA-Factory {version}: it stops at "
                "start-up with the fast tokenizer (the default)",
            )
