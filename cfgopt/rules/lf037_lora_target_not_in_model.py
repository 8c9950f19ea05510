from __future__ import annotations

from collections.abc import Iterator

from cfgopt.knowledge.model_family import SOURCE_CONFIG, SOURCE_PARENT, LocalModel, model_name
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import TRAIN_KINDS, entry_of, is_train_group, on, value_of
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.patterns import lazy

_DECODER = frozenset(
    {"model", "embed_tokens", "layers", "self_attn", "mlp", "act_fn", "input_layernorm", "post_attention_layernorm"}
    | {"norm", "rotary_emb", "lm_head", "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
)
# Every module name (the last component, which PEFT matches a `target_modules` entry against) of each
# architecture, from the transformers modeling files (and THUDM's modeling_chatglm.py for ChatGLM 2/3, GLM-4).
MODULES: dict[str, frozenset[str]] = {
    "llama": _DECODER,
    "mistral": _DECODER,
    "qwen2": _DECODER,
    "qwen3": _DECODER | {"q_norm", "k_norm"},
    "gemma2": _DECODER | {"pre_feedforward_layernorm", "post_feedforward_layernorm"},
    "chatglm": frozenset(
        {"transformer", "embedding", "word_embeddings", "rotary_pos_emb", "encoder", "layers", "input_layernorm"}
        | {"self_attention", "query_key_value", "core_attention", "attention_dropout", "dense"}
        | {"post_attention_layernorm", "mlp", "dense_h_to_4h", "dense_4h_to_h", "final_layernorm", "output_layer"}
    ),
}
# Model names of the families above (the built-in table's, and ChatGLM's); a multimodal or mixture-of-experts
# variant has other modules, so such a name is not judged.
# (`needs`: the words each match holds, so a name of another family compiles none of them)
_NAMES = (
    ("chatglm", lazy(r"chatglm|glm-4-9b(?!.*-hf)", needs=("glm",))),
    ("llama", lazy(r"llama-?[23]", needs=("llama",))),
    ("qwen2", lazy(r"qwen2(\.5)?-\d", needs=("qwen2",))),
    ("qwen3", lazy(r"qwen3-\d", needs=("qwen3-",))),
    ("mistral", lazy(r"mistral-7b", needs=("mistral-7b",))),
    ("gemma2", lazy(r"gemma-2-\d", needs=("gemma-2-",))),
)
_OTHER_MODULES = lazy(
    r"vl|omni|moe|audio|vision|-a\d+b|llava|mixtral",
    needs=("vl", "omni", "moe", "audio", "vision", "-a", "llava", "mixtral"),
)


def _plain_name(name: str) -> bool:
    """A module name as Python spells one, `[A-Za-z_][A-Za-z0-9_]*` (an ASCII identifier)."""
    return name.isascii() and name.isidentifier()


def model_type_of(name: object, local: LocalModel | None) -> tuple[str, bool]:
    """(transformers' `model_type` of a model, whether it is certain): its local config.json's (`local`, where
    read), else by the path component that names it ("" when unknown; not certain when that is a folder above the
    last component)."""
    found = model_name(name, local)
    if found is None:
        return "", False
    if found.source == SOURCE_CONFIG:
        return found.model_type, bool(found.model_type)
    if _OTHER_MODULES.search(found.text):
        return "", False
    model_type = next((model_type for model_type, pattern in _NAMES if pattern.search(found.text)), "")
    return model_type, bool(model_type) and found.source != SOURCE_PARENT


class LoraTargetNotInModel(Rule):
    code = "LF037"
    name = "lora-target-not-in-model"
    severity = Severity.ERROR
    kinds = TRAIN_KINDS
    triggers = frozenset({"lora_target"})
    summary = "`lora_target` names modules the model does not have (where its architecture is known)"
    why = (
        "Confidence: certain where the architecture is known. LLaMA-Factory passes the names of `lora_target` to "
        "PEFT, which adapts every module whose name ends with one of them; when none matches, PEFT stops "
        "(`Target modules {...} not found in the base model`). `q_proj,v_proj` on ChatGLM (whose attention is one "
        "`query_key_value` module) is the common case. A name that matches nothing next to one that matches is "
        "silently not adapted (a warning). The architecture comes from a local `config.json` (`model_type`, read "
        "bounded: `cfgopt/loaders/model_config.py`) or the model's name (the families of the built-in shapes table, "
        "and "
        "ChatGLM), taken from the nearest path component that names a model family (`/data/chatglm3-6b/model` is "
        "ChatGLM): a name read from a folder above the last component is not certain, and its finding is a "
        "warning; other models are not judged. "
        "`all` (every linear module) is always right."
    )
    fails_when = "At model load (PEFT's `inject_adapter`), when no name matches; otherwise never."
    evidence = (
        "peft tuners/tuners_utils.py `inject_adapter` (`Target modules ... not found in the base model`)",
        "llamafactory 0.9.5 model/adapter.py `_setup_lora_tuning` (target_modules = lora_target)",
    )
    example = "model_name_or_path: THUDM/chatglm3-6b\nlora_target: q_proj,v_proj   ->  lora_target: query_key_value"
    fix_safety = "No fix: which modules to adapt is the user's choice (`all` adapts every linear module)."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        entry = entry_of(ctx, "lora_target")
        if entry is None or not is_train_group(ctx) or value_of(ctx, "finetuning_type") != "lora":
            return
        if on(ctx, "use_llama_pro"):  # expanded blocks are matched by LLaMA-Factory itself
            return
        value = entry.node.value
        names = [item.strip() for item in value.split(",")] if isinstance(value, str) else value
        if not isinstance(names, list) or not all(isinstance(name, str) for name in names) or "all" in names:
            return
        if not all(_plain_name(name) for name in names):  # a dotted path or a pattern: not judged
            return
        model_type, certain, modules = self._modules(ctx)
        if modules is None:
            return
        missing = [name for name in names if name not in modules]
        if not missing:
            return
        hint = "`query_key_value` or `all`" if model_type == "chatglm" else "`all`"
        if len(missing) == len(names):
            yield self.at_entry(
                ctx,
                entry,
                f"`lora_target: {', '.join(names)}`: a {model_type} model has no such module, PEFT stops at model "
                f"load (no target module found); use {hint}"
                + ("" if certain else f" (the {model_type} family read from a folder above the model's: not certain)"),
                on="value",
                severity=None if certain else Severity.WARNING,
            )
        else:
            yield self.at_entry(
                ctx,
                entry,
                f"`lora_target`: a {model_type} model has no module {', '.join(f'`{m}`' for m in missing)}: "
                "those names adapt nothing",
                on="value",
                severity=Severity.WARNING,
            )

    @staticmethod
    def _modules(ctx: Context) -> tuple[str, bool, frozenset[str] | None]:
        model_type, certain = model_type_of(value_of(ctx, "model_name_or_path"), ctx.job.local_model)
        return model_type, certain, MODULES.get(model_type)
