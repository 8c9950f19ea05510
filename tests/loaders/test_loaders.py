"""Consumer-parity loading and spans."""

from __future__ import annotations

from pathlib import Path

from cfgopt.loaders.json_loader import load_json
from cfgopt.loaders.launch import find_commands
from cfgopt.loaders.yaml_loader import load_yaml
from cfgopt.text.document import Document


def _yaml(text: str):
    return load_yaml(Document.from_bytes(Path("x.yaml"), text.encode()))


def _json(text: str | bytes):
    raw = text if isinstance(text, bytes) else text.encode()
    return load_json(Document.from_bytes(Path("x.json"), raw))


def test_yaml_11_booleans_and_omegaconf_floats() -> None:
    src = _yaml("a: yes\nb: off\nc: 1e-4\nd: 0x10\ne: 2024-01-01\nf: '1e-4'\n")
    assert src.data == {"a": True, "b": False, "c": 1e-4, "d": 16, "e": "2024-01-01", "f": "1e-4"}


def test_yaml_duplicate_key_kept_as_two_entries() -> None:
    src = _yaml("a: 1\na: 2\n")
    assert src.error is None
    assert [e.key for e in src.root.entries] == ["a", "a"]
    assert src.root.get("a").node.value == 2


def test_yaml_spans_point_at_key_and_value() -> None:
    text = "x: 1\nlearning_rate: 1.0e-4  # lr\n"
    src = _yaml(text)
    entry = src.root.get("learning_rate")
    assert text[entry.key_start : entry.key_end] == "learning_rate"
    assert text[entry.node.start : entry.node.end] == "1.0e-4"
    assert src.document.position(entry.node.start) == (2, 16)


def test_yaml_tags_are_never_constructed() -> None:
    src = _yaml("a: !!python/object/apply:os.system ['echo hi']\n")
    assert src.error is not None and "invalid YAML" in src.error.message


def test_yaml_alias_bomb_is_refused() -> None:
    lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 8):
        lines.append(f"{chr(97 + i)}: &{chr(97 + i)} [" + ", ".join([f"*{chr(96 + i)}"] * 10) + "]")
    src = _yaml("\n".join(lines) + "\n")
    assert src.error is not None and "expansion" in src.error.message


def test_json_strict_like_json_load() -> None:
    assert _json('{"a": 1, // c\n}').error is not None
    assert _json('{"a": 1,}').error is not None
    assert "BOM" in _json(b'\xef\xbb\xbf{"a": 1}').error.message


def test_json_spans_and_duplicates() -> None:
    text = '{\n  "a": {"b": 1e9},\n  "a": "x"\n}'
    src = _json(text)
    assert [e.key for e in src.root.entries] == ["a", "a"]
    assert src.data == {"a": "x"}
    first = src.root.entries[0]
    inner = first.node.get("b")
    assert text[inner.key_start : inner.key_end] == '"b"'
    assert text[inner.node.start : inner.node.end] == "1e9"


def test_command_line_arguments_with_spans() -> None:
    text = (
        "#!/bin/sh\n# llamafactory-cli train --ignored x\nFORCE_TORCHRUN=1 llamafactory-cli train \\\n"
        "  --flash_attn Fa --do_train --bf16=True --lora-rank 8\n"
    )
    sources = find_commands(Document.from_bytes(Path("run.sh"), text.encode()))
    assert len(sources) == 1
    root = sources[0].root
    assert [e.key for e in root.entries] == ["flash_attn", "do_train", "bf16", "lora_rank"]
    fa = root.get("flash_attn")
    assert text[fa.node.start : fa.node.end] == "Fa"
    assert root.value["do_train"] is True and root.value["bf16"] is True and root.value["lora_rank"] == 8


def test_command_line_with_yaml_is_linked_not_parsed() -> None:
    sources = find_commands(Document.from_bytes(Path("run.sh"), b"llamafactory-cli train cfg.yaml\n"))
    assert sources[0].command["yaml"][0] == "cfg.yaml"


def test_crlf_and_bom_documents_round_trip() -> None:
    raw = b"\xef\xbb\xbfa: 1\r\nb: 2\r\n"
    doc = Document.from_bytes(Path("x.yaml"), raw)
    assert doc.has_bom and doc.newline == "\r\n"
    assert doc.to_bytes() == raw
    assert load_yaml(doc).data == {"a": 1, "b": 2}


def test_binary_and_non_utf8_are_document_errors() -> None:
    import pytest

    from cfgopt.text.document import DocumentError

    with pytest.raises(DocumentError, match="binary"):
        Document.from_bytes(Path("x.yaml"), b"a\x00b")
    with pytest.raises(DocumentError, match="UTF-8"):
        Document.from_bytes(Path("x.yaml"), b"a: \xff\n")
