"""The options of a launcher (`torchrun`, `deepspeed`, `accelerate launch`), of `python` and of an MPI / Slurm
wrapper, read as words: which take no value (`_FLAGS`, from each launcher's argparse parser), where the options
end and the script begins (`read_options`, `is_script_path`), an expansion that may hold any option
(`UNKNOWN_OPTIONS`), and a GPU or process count an option's word states (`gpu_count`).
"""

from __future__ import annotations

from cfgopt.knowledge.targets import MAX_GPUS
from cfgopt.loaders.shell import Word
from cfgopt.text.user_text import integer


def word_set(text: str) -> frozenset[str]:
    return frozenset(text.split())


# The options of each launcher that take no value (from their argparse parsers: torch 2.x `torchrun`,
# deepspeed 0.19 `deepspeed`, accelerate 1.11 `accelerate launch`, a few of older releases); every other option
# takes one, unless a Python script follows it at once (a flag of a release not listed here).
_FLAGS = {
    "torchrun": word_set(
        "-h --help -m --module --no-python --no_python --run-path --run_path --standalone --virtual-local-rank "
        "--virtual_local_rank --use_env --use-env"  # the last two: python -m torch.distributed.launch
    ),
    "deepspeed": word_set(
        "-h --help -q --quiet --bind_cores_to_rank --force_multi --module --no_local_rank --no_python --no_ssh "
        "--no_ssh_check --save_pid --elastic_training"
    ),
    "accelerate": word_set(
        "-h --help -m -q --quiet --cpu --debug --module --multi-gpu --multi_gpu --no-python --no_python --tpu "
        "--use-deepspeed --use_deepspeed --use-fsdp --use_fsdp --use-megatron-lm --use_megatron_lm --use-xpu "
        "--use_xpu --downcast-bf16 --downcast_bf16 --same-network --same_network --enable-cpu-affinity "
        "--enable_cpu_affinity --no-tpu-cluster --no_tpu_cluster --tpu-cluster --tpu_cluster --tpu-use-sudo "
        "--tpu_use_sudo --use-parallelism-config --use_parallelism_config --dynamo-use-dynamic "
        "--dynamo_use_dynamic --dynamo-use-fullgraph --dynamo_use_fullgraph --dynamo-use-regional-compilation "
        "--dynamo_use_regional_compilation --fp8-use-autocast-during-eval --fp8_use_autocast_during_eval"
    ),
    "python": word_set("-b -B -d -E -i -I -O -OO -P -q -s -S -u -v -V -x"),
}


UNKNOWN_OPTIONS = "$"  # the key of `options` that says an expansion there may hold any launcher option


def read_options(words: list[Word], k: int, kind: str) -> tuple[dict[str, Word], int]:
    """The options of a launcher (or of python) from k, and the index of the word after them."""
    flags = _FLAGS[kind]
    options: dict[str, Word] = {}
    while k < len(words) and ((words[k].text.startswith("-") and len(words[k].text) > 1) or words[k].spread):
        if words[k].spread and not words[k].text.startswith("-"):
            if words[k].text.endswith(".py") and is_script_path(words[k]):
                break  # `${base_path}/src/train.py`: the script, wherever the checkout is
            options[UNKNOWN_OPTIONS] = words[k]  # `torchrun $DIST_ARGS src/train.py`: known only at run time
            k += 1
            continue
        text = words[k].text
        option, eq, inline = text.partition("=")
        followed_by_script = k + 1 < len(words) and words[k + 1].text.endswith(".py")
        takes_value = not eq and text not in flags and not followed_by_script
        if (kind == "python" and text in ("-m", "-c", "-W", "-X")) or (kind != "python" and takes_value):
            if k + 1 >= len(words):
                return options, len(words)
            options[option] = words[k + 1]
            if text in ("-m", "-c"):  # python: what follows is the module's arguments
                return options, k + 2
            k += 2
            continue
        options[option] = Word(inline, words[k].start, words[k].end, words[k].literal) if eq else words[k]
        k += 1
    return options, k


def wrapper_options(words: list[Word]) -> dict[str, Word]:
    """`-np 16`, `--ntasks=8`, `-N 2`: each option with the word after it (or its inline value)."""
    options: dict[str, Word] = {}
    for i, word in enumerate(words):
        name, eq, inline = word.text.partition("=")
        if not name.startswith("-"):
            continue
        if eq:
            options[name] = Word(inline, word.start, word.end, word.literal)
        elif i + 1 < len(words):
            options[name] = words[i + 1]
    return options


def is_script_path(word: Word) -> bool:
    """Can the word name an entry point? A literal one, or one whose last path component is literal
    (`${base_path}/src/train_bash.py`, `"$LF_DIR"/src/train.py`: where the checkout is does not matter)."""
    tail = word.text.rsplit("/", 1)
    return word.literal or (len(tail) == 2 and not set("$`\"'") & set(tail[1]))


def gpu_count(word: Word | None) -> int | None:
    if word is None or not word.literal:
        return None
    count = integer(word.text)
    return count if count is not None and 0 < count <= MAX_GPUS else None
