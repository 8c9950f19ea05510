from __future__ import annotations

from collections.abc import Iterator

from cfgopt.knowledge import versions
from cfgopt.loaders import edits
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import fields_for, group_of, top_entries
from cfgopt.rules.support.precision import stops_on_target
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Entry, Kind
from cfgopt.text.user_text import is_number

# The WebUI's own widget ids (webui/runner.py L126-290) that blogs copy into YAML, with the keys the
# WebUI writes for each value. None = the value maps to no key (delete).
WEBUI_KEYS: dict[str, dict[object, tuple[str, object] | None]] = {
    "compute_type": {
        "bf16": ("bf16", True),
        "fp16": ("fp16", True),
        "pure_bf16": ("pure_bf16", True),
        "fp32": None,
    },
    "booster": {
        "flashattn2": ("flash_attn", "fa2"),
        "unsloth": ("use_unsloth", True),
        "liger_kernel": ("enable_liger_kernel", True),
        "auto": None,
    },
}
# Renamed keys: the new name means exactly the old one, so the rename is safe.
RENAMED = {"evaluation_strategy": "eval_strategy"}
REMOVED_IN_TRANSFORMERS_5 = {
    "group_by_length",
    "save_safetensors",
    "include_tokens_per_second",
    "fsdp_transformer_layer_cls_to_wrap",
    "half_precision_backend",
    "fp16_backend",
    "fp16_opt_level",
    "no_cuda",
    "use_mps_device",
    "tpu_num_cores",
    "torchdynamo",
    "jit_mode_eval",
    "ray_scope",
    "adafactor",
    "past_index",
    "include_inputs_for_metrics",
    "use_legacy_prediction_loop",
    "mp_parameters",
    "fsdp_min_num_params",
    "per_gpu_train_batch_size",
    "per_gpu_eval_batch_size",
    "dispatch_batches",
}
MEGATRON_KEYS = {
    "tensor_model_parallel_size",
    "pipeline_model_parallel_size",
    "expert_model_parallel_size",
    "context_parallel_size",
    "sequence_parallel",
    "use_distributed_optimizer",
    "overlap_grad_reduce",
    "overlap_param_gather",
    "moe_grouped_gemm",
    "moe_token_dispatcher_type",
    "apply_rope_fusion",
    "bias_activation_fusion",
    "recompute_granularity",
    "virtual_pipeline_model_parallel_size",
    "recompute_method",
    "recompute_num_layers",
    "expert_tensor_parallel_size",
    "moe_layer_recompute",
    "account_for_embedding_in_pipeline_split",
    "account_for_loss_in_pipeline_split",
    "sequence_packing",
}
# Keys people write for the held-out split, with what each means in LLaMA-Factory's one key for it, `val_size`
# (the fraction, or the number of examples, held out for evaluation): the same value, or its complement.
SPLIT_KEYS: dict[str, str] = {
    "train_size": "complement",
    "train_ratio": "complement",
    "train_split": "complement",
    "test_size": "same",
    "eval_size": "same",
    "valid_size": "same",
    "validation_size": "same",
    "val_ratio": "same",
    "eval_ratio": "same",
    "test_ratio": "same",
    "validation_split": "same",
    "val_split": "same",
    "eval_split": "same",
}


class UnknownKey(Rule):
    code = "LF001"
    name = "unknown-key"
    severity = Severity.ERROR
    kinds = frozenset({Kind.LF_TRAIN, Kind.LF_INFER, Kind.LF_CLI})
    summary = "A key LLaMA-Factory does not know: the run stops before it starts"
    why = (
        "LLaMA-Factory parses the config with `HfArgumentParser.parse_dict(..., allow_extra_keys=False)` over its "
        "argument dataclasses (train: model, data, training, finetuning, generating; chat/export: no training "
        "arguments). Any other key stops the run with `ValueError: Some keys are not used by the "
        "HfArgumentParser`. Keys come from other versions (`evaluation_strategy`, removed in transformers 5), "
        "from the WebUI's widget ids (`compute_type`), from blogs (`disable_torch_compile`), or are typos. A split "
        "key from other libraries (`train_size: 0.8`) gets the `val_size` it means (`val_size: 0.2`). A "
        "Megatron-Core config (LLaMA-Factory's examples/megatron/, read only under USE_MCA=1 with mcore_adapter) "
        "is reported once, not key by key."
    )
    fails_when = "At start-up, in `get_train_args`, seconds after launch (after the job waited in the queue)."
    evidence = (
        "llamafactory 0.9.5 hparams/parser.py `_parse_args` (allow_extra_keys = ALLOW_EXTRA_ARGS env)",
        "transformers 5.6.0 hf_argparser.py `parse_dict`: 'Some keys are not used by the HfArgumentParser'",
        "llamafactory 0.9.5 webui/runner.py L171-173: compute_type is the WebUI dropdown "
        "(mapped to fp16/bf16/pure_bf16)",
        "https://github.com/hiyouga/LlamaFactory/issues/7412 (removed key), #6531 (typo `ax_samples`)",
    )
    example = (
        "compute_type: bf16          ->  bf16: true\n"
        "disable_torch_compile: true ->  (removed; torch_compile is off by default)"
    )
    fix_safety = (
        "Safe: WebUI keys mapped the way the WebUI maps them (`compute_type: bf16` -> `bf16: true`; none where "
        "that switch stops the run on the target, a CPU without `use_cpu`: LF008), renames "
        "with the same meaning (`evaluation_strategy`), and `disable_torch_compile: true` (compilation is already "
        "off). Unsafe: did-you-mean renames, and removing `disable_torch_compile: false` (it meant 'compile', "
        "which cfgopt does not switch on for you: set `torch_compile: true` after measuring)."
    )

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        fields = fields_for(ctx)
        present = {e.key for e in top_entries(src)}
        lf = ctx.settings.lf_schema
        stops = (
            "stops at once with `Some specified arguments are not used by the HfArgumentParser`"
            if src.kind == Kind.LF_CLI and not src.command.get("yaml")
            else "stops at start-up with `Some keys are not used by the HfArgumentParser`"
        )
        megatron = [e for e in top_entries(src) if e.key in MEGATRON_KEYS and e.key not in fields]
        if megatron:
            yield self._megatron(ctx, megatron, lf.version)
        for entry in top_entries(src):
            key = entry.key
            if key in fields or key in MEGATRON_KEYS:
                continue
            head = f"Unknown key `{key}`: LLaMA-Factory {lf.version} {stops}"
            hint, fix = self._hint(ctx, entry, fields, present, lf)
            yield self.at_entry(ctx, entry, f"{head}; {hint}" if hint else head, fix=fix)

    def _megatron(self, ctx: Context, entries: list[Entry], version: str) -> Diagnostic:
        """A Megatron config (LLaMA-Factory's examples/megatron/): its Megatron-Core keys said once, not one by one."""
        names = ", ".join(f"`{e.key}`" for e in entries[:3]) + (
            f" and {len(entries) - 3} more" if len(entries) > 3 else ""
        )
        return self.at_entry(
            ctx,
            entries[0],
            f"A Megatron-Core config ({names}): LLaMA-Factory {version} reads these keys only when launched with "
            "USE_MCA=1 and mcore_adapter installed, and stops at start-up without that; cfgopt does not check them "
            "(for a USE_MCA=1 launch: `# cfgopt: ignore-file[LF001]`)",
        )

    def _split_hint(self, ctx: Context, entry: Entry, fields, present) -> tuple[str, object] | None:
        """`train_size: 0.8` means `val_size: 0.2`: the did-you-mean that knows what the key meant."""
        src, key, value = ctx.source, entry.key, entry.node.value
        meaning = SPLIT_KEYS.get(key)
        if meaning is None or "val_size" not in fields:
            return None
        if "val_size" in present:
            return "LLaMA-Factory's held-out split is `val_size` (already set)", None
        number = value if is_number(value) else None
        if isinstance(value, str):  # a command-line word: `--train_size 0.8`
            try:
                number = float(value)
            except ValueError:
                number = None
        if meaning == "complement":
            if number is None or not 0 < number < 1:
                return (
                    "LLaMA-Factory sets the held-out part instead: `val_size` (the evaluation fraction or count)",
                    None,
                )
            new_value = round(1 - number, 6)
        else:
            if number is None or number <= 0:
                return "LLaMA-Factory's held-out split is `val_size` (the evaluation fraction or count)", None
            new_value = number
        change = edits.rename_key(src, entry, "val_size")
        if new_value != number:
            value_edits = edits.replace_value(src, entry, new_value)
            if value_edits is None:
                return f"did you mean `val_size: {new_value:g}`? (the evaluation part)", None
            change += value_edits
        return (
            f"did you mean `val_size: {new_value:g}`? (LLaMA-Factory holds out `val_size` for evaluation and trains "
            "on the rest)",
            self.fix(f"Replace with `val_size: {new_value:g}`", change, safe=False),
        )

    def _sampling_hint(self, ctx: Context, entry: Entry, fields, present) -> tuple[str, object] | None:
        """transformers 5 folded `group_by_length` into `train_sampling_strategy` (trainer.py `_get_train_sampler`:
        "group_by_length" picks the same LengthGroupedSampler): `true` becomes that value, `false` the default."""
        if (
            entry.key != "group_by_length"
            or "train_sampling_strategy" not in fields
            or "train_sampling_strategy" in present
        ):
            return None
        src, value = ctx.source, entry.node.value
        if value is False:
            return "transformers 5 samples at random by default", self.fix(
                "Remove `group_by_length: false`", edits.delete_entry(src, entry), safe=True
            )
        if value is not True:
            return None
        renamed = edits.rename_key(src, entry, "train_sampling_strategy")
        valued = edits.replace_value(src, entry, "group_by_length")
        message = (
            "transformers 5 reads it as `train_sampling_strategy: group_by_length` (the same length-grouped sampler)"
        )
        if not renamed or not valued:
            return message, None
        return message, self.fix("Write `train_sampling_strategy: group_by_length`", renamed + valued, safe=True)

    def _hint(self, ctx: Context, entry: Entry, fields, present, lf) -> tuple[str, object]:
        src, key, value = ctx.source, entry.key, entry.node.value
        if key in WEBUI_KEYS:
            return self._webui_hint(ctx, entry, present)
        if key == "disable_torch_compile":
            compile_on = value is False or (isinstance(value, str) and value.lower() in ("false", "no", "0"))
            msg = "compilation is HF's opt-in `torch_compile` (default false)" + (
                "; `false` here meant 'compile': set `torch_compile: true` only after measuring it"
                if compile_on
                else ", so this line can simply go"
            )
            return msg, self.fix("Remove `disable_torch_compile`", edits.delete_entry(src, entry), safe=not compile_on)
        if key in RENAMED and RENAMED[key] in fields and RENAMED[key] not in present:
            new = RENAMED[key]
            return (
                f"renamed to `{new}`",
                self.fix(f"Rename to `{new}`", edits.rename_key(src, entry, new), safe=True),
            )
        split = self._split_hint(ctx, entry, fields, present)
        if split is not None:
            return split
        if key in lf.not_settable:
            return "LLaMA-Factory derives this field itself (init=False); it cannot be set", None
        group = group_of(src)
        history = versions.lf_key_history(key, group, lf.version)
        grouped = self._sampling_hint(ctx, entry, fields, present)
        if grouped is not None:  # transformers 5's spelling of the same sampler, and the releases that read the old
            return (f"{grouped[0]}; {history}" if history else grouped[0]), grouped[1]
        if key in REMOVED_IN_TRANSFORMERS_5:
            removed = (
                f"removed from TrainingArguments in transformers 5 "
                f"(LLaMA-Factory {lf.version} uses transformers {lf.transformers})"
            )
            return (f"{removed}; {history}" if history else removed), None
        for other in ("train", "infer"):
            if other != group and key in lf.group(other):
                sub = "train" if other == "train" else "chat/export/api"
                return f"it is only valid for `llamafactory-cli {sub}`", None
        if history:  # a real key of another release, not a typo
            return f"{history} (see `--llamafactory-version`)", None
        from cfgopt.text.suggest import closest  # only for an unknown name (start-up)

        guess = closest(key, fields)
        if guess and guess not in present:
            return (
                f"did you mean `{guess}`?",
                self.fix(f"Rename to `{guess}`", edits.rename_key(src, entry, guess), safe=False),
            )
        if guess:
            return f"did you mean `{guess}` (already set)?", None
        return "", None

    def _webui_hint(self, ctx: Context, entry: Entry, present) -> tuple[str, object]:
        """A LLaMA-Factory WebUI setting saved into a config: the config key it stands for, if any."""
        src, key, value = ctx.source, entry.key, entry.node.value
        mapping = WEBUI_KEYS[key]
        if isinstance(value, (str, int, float, bool)) and value in mapping:
            target = mapping[value]
            if target is None:
                return (
                    f"it is a WebUI setting; `{value}` is the default, so the key can go",
                    self.fix(f"Remove `{key}`", edits.delete_entry(src, entry), safe=True),
                )
            new_key, new_value = target
            rival = {"bf16": "fp16", "fp16": "bf16", "pure_bf16": "fp16"}.get(new_key)
            rival_entry = src.root.get(rival) if rival else None
            if rival_entry is not None and rival_entry.node.value is True:
                return (
                    f"it is the WebUI's name for `{new_key}: true`, which contradicts `{rival}: true` "
                    "here; keep one precision",
                    self.fix(f"Remove `{key}`", edits.delete_entry(src, entry), safe=False),
                )
            if new_key in present:
                existing = src.root.get(new_key)
                if existing is not None and existing.node.value == new_value:
                    return (
                        f"it is a WebUI setting, and `{new_key}: {new_value}` is already set",
                        self.fix(f"Remove `{key}`", edits.delete_entry(src, entry), safe=True),
                    )
                return f"it is the WebUI's name for `{new_key}: {str(new_value).lower()}`", None
            stops = stops_on_target(ctx, new_key) if new_value is True else None
            if stops:  # the switch would stop the run on this target (LF008's error): nothing is written
                return (
                    f"it is the WebUI's widget for precision; the config key is `{new_key}: true`, but on target "
                    f"{ctx.settings.target.name} {stops} (LF008"
                    + ("; `use_cpu: true` trains on CPU with it)" if new_key == "bf16" else ")"),
                    None,
                )
            new_edits = edits.rename_key(src, entry, new_key)
            value_edits = edits.replace_value(src, entry, new_value)
            if value_edits is None:
                return f"it is the WebUI's name for `{new_key}`", None
            rendered = edits.render_value(src, new_value)
            return (
                f"it is the WebUI's widget for precision; the config key is `{new_key}: {rendered}`",
                self.fix(f"Replace with `{new_key}: {rendered}`", new_edits + value_edits, safe=True),
            )
        return (
            f"it is a WebUI setting, not a config key (use one of {sorted(str(v) for v in mapping)})",
            None,
        )
