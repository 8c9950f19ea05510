"""Candidate rules from the knowledge files that cfgopt does not implement, with the reason.

Rendered into docs/rules.md under "Not implemented" by scripts/gen_rule_docs.py. Each entry:
(candidate, where it was proposed, why it is not a rule (yet)). Two lists, one per area, so that
work on LLaMA-Factory rules and on DeepSpeed rules never edits the same lines.
"""

from __future__ import annotations

# LLaMA-Factory, ROCm/attention/data speed candidates (docs/evidence/llamafactory.md, docs/evidence/rocm_perf.md)
NOT_IMPLEMENTED_LF: list[tuple[str, str, str]] = [
    (
        "json-config: a LLaMA-Factory config passed as .json",
        "docs/evidence/llamafactory.md §6 #8",
        (
            "A file-kind/launch question: discovery classifies JSON as DeepSpeed, and the .json crash is "
            "in `read_args` of the command, not in a key; belongs to the command loader (LF_CLI)."
        ),
    ),
    (
        "cli-override-form: `--key value` after a YAML file",
        "docs/evidence/llamafactory.md §6 #9",
        (
            "Needs the command loader to keep the YAML path and the OmegaConf overrides apart; the loader"
            " is not part of the rule half."
        ),
    ),
    (
        "ds-launch: `deepspeed` with one visible GPU and no FORCE_TORCHRUN=1 (G11/G12)",
        "docs/evidence/llamafactory.md §6 #16",
        (
            "Depends on the launch environment (visible GPUs, FORCE_TORCHRUN), which a config does not "
            "state; `--gpus 1` alone would give false errors for torchrun launches."
        ),
    ),
    (
        "zero3-fits: ZeRO-3/offload for LoRA on a model that fits (PERF001)",
        "docs/evidence/llamafactory.md §6 #34",
        "Cross-file (XF) DeepSpeed candidate: left to the DeepSpeed half of issue 4, which owns ZeRO stage rules.",
    ),
    (
        "liger on a model type it does not support (no-op)",
        "docs/evidence/llamafactory.md §6 #38",
        (
            "Needs the model's config.json model_type; names are not reliable enough to call a no-op "
            "(PF009 only suggests Liger for names it recognises)."
        ),
    ),
    (
        "cutoff/PT packing: dropped or truncated samples, PT step counts (DATA002)",
        "docs/evidence/llamafactory.md §6 #40",
        "Data-aware: needs the dataset's length distribution.",
    ),
    (
        "tokenized-path: an existing `tokenized_path` overrides every data argument (DATA003)",
        "docs/evidence/llamafactory.md §6 #41",
        "Depends on whether the folder exists at launch time (filesystem), not on the config.",
    ),
    (
        "ddp-timeout: default 1800 s or a tiny `ddp_timeout` with large datasets (DATA004)",
        "docs/evidence/llamafactory.md §6 #42",
        (
            "Needs the preprocessing time (dataset size, workers); the default is right for small "
            "datasets, so a static rule would mostly be noise."
        ),
    ),
    (
        "report-to unset enables every installed logger (MISC001)",
        "docs/evidence/llamafactory.md §6 #43",
        "Not true for the pinned transformers 5.6.0: the default is `none` (training_args.py L1042, L1564).",
    ),
    (
        "resume: existing output_dir with checkpoints silently resumes (MISC002, A2)",
        "docs/evidence/llamafactory.md §6 #44",
        "Filesystem state at launch time, not config.",
    ),
    (
        "extra-args: ALLOW_EXTRA_ARGS=1 / DISABLE_VERSION_CHECK=1 in the launch env (ENV001)",
        "docs/evidence/llamafactory.md §6 #45",
        "Environment variables of the launch script; the command loader does not expose them to rules yet.",
    ),
    (
        "stack: nightly/dev torch, non-AMD images, Python < 3.11 (ROCM005)",
        "docs/evidence/llamafactory.md §6 #32",
        "Environment, not config.",
    ),
    (
        "allocator: expandable_segments on ROCm 7.2 hangs (ROCM006)",
        "docs/evidence/llamafactory.md §6 #33",
        "Environment (launcher default, PyTorch build), not config.",
    ),
    (
        (
            "W3/W5/W6/W7: upcast_layernorm with QLoRA, GaLore without pure_bf16, eval in 4/8-bit, DPO "
            "eval without ref_model"
        ),
        "docs/evidence/llamafactory.md §1.6",
        "LLaMA-Factory's own log recommendations with no measured effect; no evidence that following them matters.",
    ),
    (
        "trackio without `project` (X2)",
        "docs/evidence/llamafactory.md §1.6",
        (
            "Unreachable from a config: `project` defaults to 'huggingface', so the check only fails for "
            "an explicit empty value."
        ),
    ),
    (
        "X1: missing optional packages (unsloth, liger-kernel, galore, deepspeed, jieba/nltk/rouge...)",
        "docs/evidence/llamafactory.md §1.6",
        "Depends on the job image's installed packages.",
    ),
    (
        (
            "L3/L4/L6/L10/L11: gemma2 attention forcing, rope_scaling skipped, PTQ checkpoint under "
            "ZeRO-3/FSDP, DoRA on PTQ"
        ),
        "docs/evidence/llamafactory.md §1.6",
        (
            "Need the model's config.json (model_type, quantization_config, max_position_embeddings), "
            "which cfgopt does not read."
        ),
    ),
    (
        "image/video max pixels below min pixels; init_special_tokens without new_special_tokens_config",
        "docs/evidence/llamafactory.md §1.6",
        "Rare in real configs (none in the corpus); cheap to add later as one ModelArguments rule.",
    ),
    (
        (
            "HF TrainingArguments: reduce_lr_on_plateau/greedy without eval, logging_steps 0, non-integer"
            " steps > 1, dataloader_prefetch_factor with 0 workers, warmup_steps < 0"
        ),
        "docs/evidence/llamafactory.md §1.6",
        "Parse-time errors of HF's own argument checks; not yet implemented (cheap, low frequency).",
    ),
    (
        "R05/R16/R19-R24: debug and NCCL/RCCL/HIP/TunableOp environment variables",
        "docs/evidence/rocm_perf.md §7a",
        "Environment variables, not LLaMA-Factory keys; need env from launch scripts.",
    ),
    (
        "R10/R11/R31: SDPA vs fa2 on ROCm by PyTorch version; padded-mask correctness",
        "docs/evidence/rocm_perf.md §7a",
        "Depend on the installed PyTorch/AOTriton version; contested with no MI300X measurement.",
    ),
    (
        "R12/R13: gemma-2 softcap with ROCm CK fa2; sliding window with Triton FA",
        "docs/evidence/rocm_perf.md §7a",
        "Need model_type (config.json) and the flash-attn backend of the image.",
    ),
    (
        "R18/R29: 2 or 4 MI300X GPUs for comm-heavy runs; one process driving several GPUs",
        "docs/evidence/rocm_perf.md §7a",
        "Launch layout, not config (`llamafactory-cli` always starts one process per GPU).",
    ),
    (
        "R25: torch_compile on ROCm",
        "docs/evidence/rocm_perf.md §7a",
        "Contested with no measurement; compile time dominates short runs.",
    ),
    (
        "H1: fa3 on Hopper",
        "docs/evidence/rocm_perf.md §7a",
        "`fa3` fails at model load in LLaMA-Factory 0.9.5 (LF006), so it cannot be recommended.",
    ),
    (
        "dataloader_num_workers / preprocessing workers",
        "docs/evidence/rocm_perf.md §2 (dataloader workers)",
        "Data is pre-tokenised; no measured step-time effect at 0-4 workers (the H200 runs used 0).",
    ),
]

# DeepSpeed, ZeRO/offload/communication and cross-file candidates
# (docs/evidence/deepspeed.md, docs/evidence/rocm_perf.md)
NOT_IMPLEMENTED_DS: list[tuple[str, str, str]] = [
    (
        "Key not supported by the installed DeepSpeed version (ZeRO++, compute_grad_norm, super_offload, ...)",
        "docs/evidence/deepspeed.md §7 #9 (SCHEMA-015)",
        "cfgopt judges one pinned DeepSpeed (0.19.8) per run; differences between releases belong to the "
        "multi-version snapshots (cfgopt/versions.py, DS090), not to a per-key rule here",
    ),
    (
        '"auto" in a config used outside the HF Trainer (bare launcher, TRL reference model, early zero.Init)',
        "docs/evidence/deepspeed.md §7 #16 (AUTO-032)",
        "the launcher is not in the config: cfgopt cannot tell a bare `deepspeed` launch from the HF path; "
        'DS011 covers the "auto" keys no layer fills',
    ),
    (
        'Hidden-size "auto" keys on a model without `config.hidden_size` / `hidden_sizes`',
        "docs/evidence/deepspeed.md §7 #17 (AUTO-033)",
        "every model family cfgopt knows has `hidden_size`; telling the rare exceptions needs the model's own "
        "config.json and its class, which the lint path does not load",
    ),
    (
        "Hard-coded optimizer betas / scheduler warmup or step counts that differ from the training config",
        "docs/evidence/deepspeed.md §7 #19 (HF-040, remainder)",
        "XF002 compares batch sizes, accumulation, clipping, lr, eps and weight decay; betas and scheduler steps "
        "need the run's step count (dataset size), which a static linter does not know",
    ),
    (
        "Missing `train_micro_batch_size_per_gpu` / `train_batch_size` in an HF-path DeepSpeed JSON",
        "docs/evidence/deepspeed.md §7 #20 (HF-041, remainder)",
        "DeepSpeed derives the missing one from the others and the Trainer's dataloader uses its own batch size; "
        "no wrong run was found in the code path (gradient_clipping and gradient_accumulation_steps are XF004)",
    ),
    (
        "accelerate config YAML with DeepSpeed fields next to `deepspeed_config_file`",
        "docs/evidence/deepspeed.md §7 #23 (HF-044)",
        "LLaMA-Factory passes the DeepSpeed JSON through TrainingArguments, not an accelerate config file; "
        "accelerate YAMLs are recognised (CFG003) but not linked to a DeepSpeed JSON",
    ),
    (
        "fp16 in the DeepSpeed JSON on a bf16-capable target (MI300X, Hopper)",
        "docs/evidence/deepspeed.md §7 #25 (PREC-051)",
        "the precision is chosen in the LLaMA-Factory config (PF001 judges `fp16: true` there); an explicit "
        'DeepSpeed value that contradicts it is XF001, and "auto" just follows it',
    ),
    (
        "`round_robin_gradients` without CPU offload",
        "docs/evidence/deepspeed.md §7 #27 (ZERO-060, part)",
        "not a no-op in 0.19.8: stage 1/2 still reorders gradient partitions with it (stage_1_and_2.py:327, "
        ":413), so calling it inert would be false",
    ),
    (
        "NVMe path missing or not writable, async_io (libaio) not buildable",
        "docs/evidence/deepspeed.md §7 #29 (OFF-070, part)",
        "host state, not config: the path lives on the training nodes and the op build on their toolchain "
        "(DS016 reports a missing nvme_path, DS009 GDS on ROCm)",
    ),
    (
        "Offload with a torch optimizer accelerate cannot map (any torch optimizer becomes DeepSpeedCPUAdam)",
        "docs/evidence/deepspeed.md §7 #30 (OFF-071, part)",
        "accelerate 1.11.0 utils/deepspeed.py:29-80 maps every client optimizer to DeepSpeedCPUAdam/Adagrad under "
        "offload (LLaMA-Factory `optim: sgd` would silently run Adam); needs the optim-to-class table, left for a "
        "later rule (DS021 covers zero_force_ds_cpu_optimizer: false)",
    ),
    (
        "Offload `pin_memory` (default true since 0.19.5) against a low memlock limit",
        "docs/evidence/deepspeed.md §7 #31 (OFF-072)",
        "`ulimit -l` / container memlock is host state a config linter cannot see",
    ),
    (
        "`optimizer.type` / `scheduler.type` validity and binding `params` to the class signature",
        "docs/evidence/deepspeed.md §7 #32 (OPT-080), #33 (params part)",
        "needs the optimizer and scheduler signatures (FusedAdam, DeepSpeedCPUAdam, WarmupLR, torch.optim.*) "
        "in the schema snapshot, which sync_schemas.py does not record yet; XF005 reports the blocks themselves",
    ),
    (
        "Bucket sizes against hidden size and memory (too small: latency; too large: OOM)",
        "docs/evidence/deepspeed.md §7 #36 (PERF-101); docs/evidence/rocm_perf.md §2 knobs",
        'no measured threshold exists; HF\'s "auto" (h^2, 0.9 h^2, 10 h) is the accepted default. The overlap_comm '
        "buffer memory, the one large cost, is reported by DS019",
    ),
    (
        "`zero_hpz_partition_size` not dividing the world size",
        "docs/evidence/deepspeed.md §7 #37 (PERF-102, part)",
        "DeepSpeed's behaviour for a non-dividing hpZ size was not confirmed in the pinned code; DS020 reports "
        "hpZ on a single node and quantized ZeRO++ on ROCm",
    ),
    (
        "Offload on ROCm needs DeepSpeedCPUAdam built with hipcc (preflight `ds_report`)",
        "docs/evidence/deepspeed.md §7 #40 (ROCM-110, part)",
        "toolchain state on the training image; XF005 notes the FusedAdam JIT build of a DeepSpeed `optimizer` "
        "block on ROCm, DS009 GDS",
    ),
    (
        "RCCL/HIP environment, ZeRO-3 all-gather hang conditions",
        "docs/evidence/deepspeed.md §7 #41 (ROCM-111)",
        "environment variables and library versions, not configuration files",
    ),
    (
        "ZeRO-3 with a PTQ-quantized checkpoint (GPTQ/AWQ/...)",
        "docs/evidence/deepspeed.md §7 #42 (LF-120, part)",
        "needs the checkpoint's `quantization_config`; the table of known models holds only unquantized "
        "releases (the other ZeRO-3 incompatibilities are LF009, GaLore/APOLLO/BAdam LF012, torchrun XF003)",
    ),
    (
        "LLaMA-Factory's `overlap_comm: false`: try true when memory allows",
        "docs/evidence/rocm_perf.md §7a R17",
        "contested and opposite to DS019's caution; only a measured A/B on the target can settle it",
    ),
    (
        "Multi-node ZeRO-3 on MI300X without TORCH_NCCL_HIGH_PRIORITY=1 / GPU_MAX_HW_QUEUES=2",
        "docs/evidence/rocm_perf.md §7a R22",
        "environment variables of the launch, not configuration files",
    ),
]

NOT_IMPLEMENTED = NOT_IMPLEMENTED_LF + NOT_IMPLEMENTED_DS
