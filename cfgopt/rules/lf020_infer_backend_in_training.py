from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import TRAIN_KINDS, entry_of, is_train_group
from cfgopt.text.diagnostics import Diagnostic, Severity


class InferBackendInTraining(Rule):
    code = "LF020"
    name = "infer-backend-in-training"
    severity = Severity.ERROR
    kinds = TRAIN_KINDS
    triggers = frozenset({"infer_backend"})
    summary = "`infer_backend: vllm`/`sglang` in a `llamafactory-cli train` config"
    why = (
        "Confidence: certain. get_train_args (and get_eval_args) refuse any inference backend but huggingface: "
        "vLLM and SGLang serve `chat`, `api` and `webchat` only. Typical source: an inference config reused for "
        "prediction with `do_predict`."
    )
    fails_when = "At start-up: `vLLM/SGLang backend is only available for API, CLI and Web.`"
    evidence = ("llamafactory 0.9.5 hparams/parser.py L406-407, L579-580",)
    example = "infer_backend: vllm   ->  remove it (or run scripts/vllm_infer.py)"
    fix_safety = "Unsafe: removes the key (the huggingface backend is the default)."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        if not is_train_group(ctx):
            return
        entry = entry_of(ctx, "infer_backend")
        if entry is None or entry.node.value in ("huggingface", None) or not isinstance(entry.node.value, str):
            return
        from cfgopt.loaders import edits

        yield self.at_entry(
            ctx,
            entry,
            f"`infer_backend: {entry.node.value}` in a training config: get_train_args stops at start-up with "
            "`vLLM/SGLang backend is only available for API, CLI and Web.`",
            on="value",
            fix=self.fix("Remove `infer_backend`", edits.delete_entry(ctx.source, entry), safe=False),
        )
