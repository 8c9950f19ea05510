"""A requirements file's bytes decoded as pip decodes them (cfgopt/text/requirements/pip_encoding.py): against pip
23.2.1's own `auto_decode` with a UTF-8 locale on seeded byte strings (byte order marks, coding comments on lines 1 to
3, codecs unknown or no text encoding, text in several encodings, random bytes), and the linted Document's text, spans
and encoding."""

from __future__ import annotations

import locale
import random
import sys
import warnings
from pathlib import Path

import pytest
from requirement_reads import first_failures

from cfgopt.text.document import Document, DocumentError
from cfgopt.text.requirements.files import requirement_pins
from cfgopt.text.requirements.pip_encoding import RequirementsDecodeError, decode_requirements

# every BOM of pip's table, and a second one after the first (the "utf-16" codec takes it)
MARKS = [b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff", b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff"]
MARKS += [b"\xff\xfe\xfe\xff", b"\xff\xfe\xff\xfe", b"\xef\xbb\xbf\xef\xbb\xbf", b"\xff"]
CODECS = ["utf-8", "UTF8", "latin-1", "iso-8859-15", "cp1252", "ascii", "utf-16", "utf_16", "utf-32", "utf-16-le"]
CODECS += ["utf-16-be", "shift_jis", "gbk", "koi8-r", "mac-roman", "utf-7", "utf-8-sig", "cp65001", "idna", "punycode"]
CODECS += ["unicode_escape", "raw_unicode_escape", "foo", "rot13", "base64", "hex", "zlib", "mbcs", "oem", "latin-1.x"]
COMMENTS = ["# -*- coding: {} -*-", "#coding={}", "# vim: set fileencoding={} :", "#  coding:\t{}", " # coding: {}"]
COMMENTS += ["coding: {}", "# coding {}", "#!/usr/bin/env pip\r", "# caf\u00e9"]
LINES = ["llamafactory==0.9.3", "deepspeed>=0.15", "# caf\u00e9 \u4e2d\u6587", "torch==2.5.1+cu121", "", "\\ud800 \\n"]
BODY_ENCODINGS = ["utf-8", "utf-8", "latin-1", "utf-16-le", "utf-16-be", "utf-32-le", "cp1252", "shift_jis", "ascii"]


def _sample(r: random.Random) -> bytes:
    """A requirements file's bytes: maybe a mark, maybe a coding comment on line 1, 2 or 3, lines in one encoding
    (characters it lacks replaced), or random bytes."""
    mark = r.choice(MARKS) if r.random() < 0.3 else b""
    if r.random() < 0.1:
        return mark + r.randbytes(r.randint(0, 40))
    lines = [r.choice(LINES) for _ in range(r.randint(0, 4))]
    if r.random() < 0.7:
        lines.insert(r.randint(0, min(2, len(lines))), r.choice(COMMENTS).format(r.choice(CODECS)))
    text = r.choice(["\n", "\r\n"]).join(lines) + r.choice(["\n", ""])
    body = text.encode(r.choice(BODY_ENCODINGS), "replace")
    if r.random() < 0.1:  # a stray byte: no UTF-8 there
        at = r.randint(0, len(body))
        body = body[:at] + bytes([r.randint(0x80, 0xFF)]) + body[at:]
    return mark + body


def _pip_decode(data: bytes) -> str | None:
    """pip's `auto_decode` (the locale set to UTF-8 by the caller); None where it raises."""
    from pip._internal.utils.encoding import auto_decode

    try:
        return auto_decode(data)
    except Exception:  # noqa: BLE001 (LookupError, UnicodeError: pip stops on the file)
        return None


def _ours(data: bytes) -> str | None:
    try:
        return decode_requirements(data).text
    except RequirementsDecodeError:
        return None


def test_the_decoding_is_pips_with_a_utf8_locale(monkeypatch: pytest.MonkeyPatch) -> None:
    """3,000 seeded byte strings: where pip's `auto_decode` (on a node whose locale is UTF-8) gives a text, the
    decoder gives the same text; where pip raises, the decoder fails too."""
    with warnings.catch_warnings():  # pip's own import warnings: not ours
        warnings.simplefilter("ignore")
        pytest.importorskip("pip._internal.utils.encoding")
    if sys.byteorder != "little":
        pytest.skip("pip's own table reads the native byte order's marks: compared on a little-endian machine")
    monkeypatch.setattr(locale, "getpreferredencoding", lambda do_setlocale=True: "UTF-8")

    def check(seed: int) -> str:
        data = _sample(random.Random(seed))
        pip, ours = _pip_decode(data), _ours(data)
        return "" if pip == ours else f"seed {seed}: {data!r}: pip {pip!r}, cfgopt {ours!r}"

    assert first_failures(range(3000), check) == []


@pytest.mark.parametrize(
    ("data", "text"),
    [
        (b"# -*- coding: latin-1 -*-\n# caf\xe9\n", "# -*- coding: latin-1 -*-\n# caf\u00e9\n"),
        (b"#!/bin/sh\n# coding=cp1252\n\x80\n", "#!/bin/sh\n# coding=cp1252\n\u20ac\n"),  # line 2
        ("torch==2.5.1\r\n".encode("utf-16"), "torch==2.5.1\r\n"),  # PowerShell 5's `pip freeze >`
        (b"\xef\xbb\xbf# coding: latin-1\ncaf\xc3\xa9", "# coding: latin-1\ncaf\u00e9"),  # a mark beats a comment
        ("x\n".encode("utf-32"), "\x00x\x00\n\x00"),  # UTF-32's little-endian mark starts with UTF-16's: read so
        (b"\xff\xfe\xfe\xff\x00x", "x"),  # the "utf-16" codec reads a second mark: big-endian after it
    ],
)
def test_what_pip_decodes(data: bytes, text: str) -> None:
    assert decode_requirements(data).text == text


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"# caf\xe9\n", "not UTF-8 text and no coding comment (byte 5: b'\\xe9')"),
        (b"a\nb\n# coding: latin-1\n\xe9", "not UTF-8 text and no coding comment (byte 22: b'\\xe9')"),  # line 3
        (b" # coding: latin-1\n\xe9", "not UTF-8 text and no coding comment"),  # not `#` first
        (b"# coding: foo\n", "its coding comment (line 1) names 'foo', no encoding pip can decode with"),
        (b"# coding: rot13\n", "its coding comment (line 1) names 'rot13', no text encoding"),
        (b"#\n# coding: mbcs\n", "its coding comment (line 2) names 'mbcs', a Windows code page"),
        (b"# coding: ascii\n\xe9", "not ascii text as its coding comment says (byte 16: b'\\xe9')"),
        (b"\xef\xbb\xbf\xe9", "not UTF-8 text after its byte order mark (byte 3: b'\\xe9')"),
        (b"\xff\xfex", "not UTF-16 (little-endian) text after its byte order mark (byte 2: b'x')"),
    ],
)
def test_what_pip_fails_on_is_said_in_one_line(data: bytes, words: str) -> None:
    """pip stops with UnicodeDecodeError or LookupError before reading a line; the message says what was tried."""
    with pytest.raises(RequirementsDecodeError) as caught:
        decode_requirements(data)
    assert words in str(caught.value) and "\n" not in str(caught.value)


def test_the_linted_document_is_the_decoded_text_and_says_its_encoding() -> None:
    """Offsets are into the decoded text: the pin of a UTF-16 file has the span of the same text in UTF-8; a file
    that is its text's UTF-8 (ASCII under a latin-1 comment, a UTF-8 mark) has no `encoding`, so fixes may edit it."""
    text = "# caf\u00e9\r\ntorch==2.5.1+cu121\r\n"
    plain = Document.from_bytes(Path("requirements.txt"), text.encode())
    for raw, encoding in [
        (text.encode("utf-16"), "UTF-16 (little-endian) by its byte order mark"),
        (b"# coding: latin-1\r\n" + text.encode("latin-1"), "latin-1 by its coding comment"),
    ]:
        doc = Document.from_bytes(Path("requirements.txt"), raw)
        assert (doc.encoding, doc.has_bom) == (encoding, False)
        (pin,), _ = requirement_pins("requirements.txt", doc.text)
        assert doc.text[pin.name_start : pin.spec_end] == "torch==2.5.1+cu121"
        assert doc.position(pin.name_start)[1] == plain.position(requirement_pins("x", plain.text)[0][0].name_start)[1]
    ascii_latin = Document.from_bytes(Path("requirements.txt"), b"# coding: latin-1\ntorch\n")
    marked = Document.from_bytes(Path("requirements.txt"), b"\xef\xbb\xbftorch\n")
    assert (ascii_latin.encoding, marked.encoding, marked.has_bom, marked.text) == (None, None, True, "torch\n")


def test_only_requirements_files_are_decoded_as_pip_decodes_them() -> None:
    """A YAML config, a DeepSpeed JSON, a pyproject.toml are UTF-8 to their readers, whatever comment they hold."""
    latin = b"# -*- coding: latin-1 -*-\n# caf\xe9\n"
    assert Document.from_bytes(Path("requirements-dev.txt"), latin).text.endswith("caf\u00e9\n")
    for name in ("train.yaml", "pyproject.toml", "notes.txt"):
        with pytest.raises(DocumentError, match="not UTF-8 text"):
            Document.from_bytes(Path(name), latin)


def test_utf16_without_a_mark_is_named_with_pips_reason() -> None:
    """No mark, no coding comment: pip reads UTF-8, gets NUL characters and fails on the requirement they give."""
    with pytest.raises(DocumentError, match=r"UTF-16 encoded .*pip reads a requirements file without a byte order"):
        Document.from_bytes(Path("requirements.txt"), "torch==2.5.1\n".encode("utf-16-le"))
    with pytest.raises(DocumentError, match=r"UTF-32 encoded .*pip reads a file starting with FF FE as UTF-16"):
        Document.from_bytes(Path("requirements.txt"), "torch==2.5.1\n".encode("utf-32"))
