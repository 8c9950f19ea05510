"""What the synthetic stand-ins support, importable without tokenizers/transformers (parent side): the chat
templates of the synthetic tokenizer, and which synthetic data each LLaMA-Factory training stage gets.

Each stage reads its data through one of LLaMA-Factory 0.9.5's dataset processors (data/loader.py
`_get_dataset_processor`): `pt` the pretraining one (plain text, concatenated and cut into `cutoff_len`
blocks), `sft` the supervised one, `rm` and `dpo` the pairwise one (`get_dataset(..., stage="rm")`: the
dataset must be `ranking: true`, and a ranking dataset is refused by every other stage), `kto` the feedback
one (a response with a desirable / undesirable tag). The dataset_info.json entries below are the alpaca-format
ones its data/parser.py `DatasetAttr.join` and data/converter.py `AlpacaDatasetConverter` read.
"""

from __future__ import annotations

from cfgopt.text.record import Record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

SUPPORTED_TEMPLATES = {"llama3", "qwen", "qwen3", "qwen3_nothink", "default", "empty", "chatml"}


class DataKind(Record):
    """One kind of synthetic dataset: its name in dataset_info.json, its cache folder, its entry there and
    what the run's notes call it."""

    dataset: str
    folder: str
    info: dict[str, Any]
    description: str


ALPACA = DataKind(
    "synthetic_alpaca",
    "data",
    {"file_name": "synthetic_alpaca.json"},
    "synthetic Alpaca-like dataset (median ~150 tokens)",
)
PAIRWISE = DataKind(
    "synthetic_pairwise",
    "data-pairwise",
    {
        "file_name": "synthetic_pairwise.json",
        "ranking": True,
        "columns": {"prompt": "instruction", "query": "input", "chosen": "chosen", "rejected": "rejected"},
    },
    "synthetic pairwise (chosen / rejected) Alpaca-like dataset (median ~150 tokens a sequence, two a sample)",
)
KTO = DataKind(
    "synthetic_kto",
    "data-kto",
    {
        "file_name": "synthetic_kto.json",
        "columns": {"prompt": "instruction", "query": "input", "response": "output", "kto_tag": "kto_tag"},
    },
    "synthetic Alpaca-like dataset with a desirable / undesirable `kto_tag` (median ~150 tokens)",
)
TEXT = DataKind(
    "synthetic_text",
    "data-text",
    {"file_name": "synthetic_text.json", "columns": {"prompt": "text"}},
    "synthetic plain-text dataset (median ~150 tokens a document, packed into cutoff_len blocks)",
)
KINDS = (ALPACA, PAIRWISE, KTO, TEXT)


def kind_named(dataset: str) -> DataKind:
    """The kind whose dataset_info.json name this is."""
    return next(kind for kind in KINDS if kind.dataset == dataset)


STAGE_DATA = {"sft": ALPACA, "pt": TEXT, "rm": PAIRWISE, "dpo": PAIRWISE, "kto": KTO}

# Stages verify and tune cannot measure, and why (one line each).
UNSUPPORTED_STAGES = {
    "ppo": (
        "stage: ppo is not supported: each PPO step generates responses and scores them with a reward model "
        "(`reward_model`) in LLaMA-Factory's own PPO loop, not the Trainer's training step that verify and tune "
        "measure; measure the reward model (stage: rm) and the policy's sft or dpo configs instead"
    ),
}


def stage_of(config: dict[str, Any]) -> str:
    """The stage LLaMA-Factory runs (its default is sft)."""
    stage = config.get("stage")
    return str(stage) if stage is not None else "sft"


def unsupported_stage(config: dict[str, Any]) -> str | None:
    """Why verify / tune cannot run this config's stage (one line), None when they can."""
    stage = stage_of(config)
    if stage in UNSUPPORTED_STAGES:
        return UNSUPPORTED_STAGES[stage]
    if stage not in STAGE_DATA:
        return f"stage: {stage} is not a LLaMA-Factory training stage ({', '.join(sorted(STAGE_DATA))} are measured)"
    return None


def data_kind(config: dict[str, Any]) -> DataKind:
    """The synthetic data this config's stage reads (ValueError for a stage verify cannot run)."""
    if reason := unsupported_stage(config):
        raise ValueError(reason)
    return STAGE_DATA[stage_of(config)]


def reference_forward(config: dict[str, Any]) -> bool:
    """Whether each step also runs a reference model's forward pass over the trained sequences (no gradient):
    DPO with a loss that needs one (LLaMA-Factory's `use_ref_model`: every `pref_loss` but orpo and simpo)
    and KTO. With LoRA and no `ref_model` the reference is the policy with its adapters off: a forward all
    the same."""
    stage = stage_of(config)
    return stage == "kto" or (stage == "dpo" and config.get("pref_loss", "sigmoid") not in ("orpo", "simpo"))
