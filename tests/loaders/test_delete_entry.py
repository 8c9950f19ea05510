"""Deleting a YAML entry (`edits.delete_entry`, every removal fix and the plan's dropped keys): its line goes whole,
with its end-of-line comment (a note on a key that is gone: `deepspeed: ...  # choices: [...]` used to stay behind as
an orphan line); every comment on a line of its own stays, above, below, inside a parent mapping, and after a block
value, whose end mark lies past such comments at the next key."""

from __future__ import annotations

from pathlib import Path

import pytest

from cfgopt.lint.fix_check import apply_edits
from cfgopt.loaders import edits
from cfgopt.loaders.yaml_loader import load_yaml
from cfgopt.text.document import Document
from cfgopt.text.source import Kind


def _delete(text: str, path: tuple[str, ...]) -> str:
    src = load_yaml(Document.from_bytes(Path("train.yaml"), text.encode()), Kind.LF_TRAIN)
    entry = src.find(path)
    assert entry is not None
    made = edits.delete_entry(src, entry)
    assert made is not None
    return apply_edits(text, made)[0]


@pytest.mark.parametrize(
    ("text", "path", "left"),
    [
        (  # LLaMA-Factory's examples/train_lora/qwen3_lora_sft_ds3.yaml, the line the plan drops
            "lora_target: all\n# the JSON\ndeepspeed: examples/deepspeed/ds_z3_config.json  # choices: "
            "[ds_z0_config.json, ds_z2_config.json, ds_z3_config.json]\n# below\n\n### dataset\ndataset: x  # mine\n",
            ("deepspeed",),
            "lora_target: all\n# the JSON\n# below\n\n### dataset\ndataset: x  # mine\n",
        ),
        ("a: 1\r\nb: 2  # note\r\n# own\r\nc: 3\r\n", ("b",), "a: 1\r\n# own\r\nc: 3\r\n"),
        ("a: 1\nb: 2  # last line, no line break", ("b",), "a: 1\n"),
        ("a:\n  b: 2  # nested\n  # own\n  c: 3  # c's\n", ("a", "b"), "a:\n  # own\n  c: 3  # c's\n"),
        ("a: 1\nb:\n  - x  # inner\n  - y  # last\n# after the list\nc: 3\n", ("b",), "a: 1\n# after the list\nc: 3\n"),
        ("a: 1\nb:\n  x: 1\n  y:\n    - 1\n\n# own\nc: 3\n", ("b",), "a: 1\n\n# own\nc: 3\n"),
        ("a: 1\nb: |\n  text\n# own\nc: 3\n", ("b",), "a: 1\n# own\nc: 3\n"),
        ("a: 1\nb: [1, 2]  # flow\n# own\nc: 3\n", ("b",), "a: 1\n# own\nc: 3\n"),
    ],
)
def test_the_line_goes_whole_and_other_comments_stay(text: str, path: tuple[str, ...], left: str) -> None:
    assert _delete(text, path) == left
