"""Config texts that several test modules judge as a job: one copy each, so that a change of what they state is
made once."""

# A Llama-3-8B LoRA SFT at cutoff 4096 with a stated precision and attention: no finding of its own that depends on
# the releases judged, so the tests of the environment read only what the pins beside it change.
# A Llama-3-8B LoRA SFT asking for FP8 (LF058, and the oracle test that builds the real Trainer from it)
FP8_LORA_8B = """model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct
stage: sft
do_train: true
finetuning_type: lora
dataset: alpaca_en_demo
template: llama3
output_dir: out
fp8: true
"""

LORA_8B = """model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct
stage: sft
do_train: true
finetuning_type: lora
lora_target: all
dataset: alpaca_en_demo
template: llama3
cutoff_len: 4096
output_dir: saves/lora
per_device_train_batch_size: 4
gradient_accumulation_steps: 4
learning_rate: 1.0e-4
bf16: true
flash_attn: sdpa
"""
