"""Real models' config.json on the Hugging Face Hub, trimmed to the keys cfgopt's parameter count reads: the
mixture-of-experts and multimodal models tests/knowledge/test_model_experts.py checks against the published
totals and transformers' builds, and tests/memory/test_memory_experts.py estimates."""

from __future__ import annotations

MIXTRAL_8X7B = {
    "model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32000, "tie_word_embeddings": False,
    "num_local_experts": 8, "num_experts_per_tok": 2,
}  # fmt: skip
QWEN3_30B_A3B = {
    "model_type": "qwen3_moe", "hidden_size": 2048, "intermediate_size": 6144, "moe_intermediate_size": 768,
    "num_hidden_layers": 48, "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128,
    "vocab_size": 151936, "tie_word_embeddings": False, "num_experts": 128, "num_experts_per_tok": 8,
    "decoder_sparse_step": 1, "mlp_only_layers": [],
}  # fmt: skip
QWEN3_235B_A22B = {
    **QWEN3_30B_A3B, "hidden_size": 4096, "intermediate_size": 12288, "moe_intermediate_size": 1536,
    "num_hidden_layers": 94, "num_attention_heads": 64,
}  # fmt: skip
QWEN15_MOE_A27B = {
    "model_type": "qwen2_moe", "hidden_size": 2048, "intermediate_size": 5632, "moe_intermediate_size": 1408,
    "shared_expert_intermediate_size": 5632, "num_hidden_layers": 24, "num_attention_heads": 16,
    "num_key_value_heads": 16, "vocab_size": 151936, "tie_word_embeddings": False, "num_experts": 60,
    "num_experts_per_tok": 4, "decoder_sparse_step": 1, "mlp_only_layers": [],
}  # fmt: skip
DEEPSEEK_V3 = {
    "model_type": "deepseek_v3", "hidden_size": 7168, "intermediate_size": 18432, "moe_intermediate_size": 2048,
    "num_hidden_layers": 61, "num_attention_heads": 128, "num_key_value_heads": 128, "vocab_size": 129280,
    "tie_word_embeddings": False, "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8,
    "first_k_dense_replace": 3, "moe_layer_freq": 1, "q_lora_rank": 1536, "kv_lora_rank": 512,
    "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
}  # fmt: skip
DEEPSEEK_V2_LITE = {
    "model_type": "deepseek_v2", "hidden_size": 2048, "intermediate_size": 10944, "moe_intermediate_size": 1408,
    "num_hidden_layers": 27, "num_attention_heads": 16, "num_key_value_heads": 16, "vocab_size": 102400,
    "tie_word_embeddings": False, "n_routed_experts": 64, "n_shared_experts": 2, "num_experts_per_tok": 6,
    "first_k_dense_replace": 1, "q_lora_rank": None, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64, "v_head_dim": 128,
}  # fmt: skip
QWEN25_VL_7B = {
    "model_type": "qwen2_5_vl", "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28,
    "num_attention_heads": 28, "num_key_value_heads": 4, "vocab_size": 152064, "tie_word_embeddings": False,
    "vision_config": {
        "depth": 32, "hidden_size": 1280, "intermediate_size": 3420, "num_heads": 16, "in_chans": 3,
        "out_hidden_size": 3584, "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2,
    },
}  # fmt: skip
QWEN2_VL_2B = {
    "model_type": "qwen2_vl", "hidden_size": 1536, "intermediate_size": 8960, "num_hidden_layers": 28,
    "num_attention_heads": 12, "num_key_value_heads": 2, "vocab_size": 151936, "tie_word_embeddings": True,
    "vision_config": {
        "depth": 32, "embed_dim": 1280, "mlp_ratio": 4, "num_heads": 16, "in_chans": 3, "hidden_size": 1536,
        "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2,
    },
}  # fmt: skip
