"""The tiny Llama every CPU run of the real trainer builds (verify's and tune's tests): one config.json dict."""

TINY = {
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 32000,
    "tie_word_embeddings": False,
    "max_position_embeddings": 2048,
    "bos_token_id": 0,
    "eos_token_id": 1,
}
