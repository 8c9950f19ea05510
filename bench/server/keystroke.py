"""Keystroke-to-diagnostics time of `cfgopt server` on the seed pair (fixtures/seed: the YAML and the DeepSpeed
JSON it names, both open): a real LSP client over stdio types into the YAML (one character per change, as an
editor sends it) and times each change until the server publishes the diagnostics of that version.
`--large-mb 5` first opens a 5 MB training YAML of its own in the same folder (`large.yaml`: the seed's keys,
then a block of per-step records under one key), as issue 45 measured it.

    python bench/server/keystroke.py [--keystrokes 200] [--warmup 20] [--large-mb 5]

Target: under 100 ms warm (issues 35 and 45). Results: bench/server/results.md."""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from lsprotocol import types as lsp
from pygls.lsp.client import LanguageClient

SEED = Path(__file__).resolve().parents[2] / "fixtures" / "seed"


def write_large(folder: Path, megabytes: float) -> Path:
    """A training YAML of `megabytes` MB: the seed's keys, then an earlier run's per-step records under one key
    (a config kept with its notes: every line of it is parsed)."""
    path = folder / "large.yaml"
    head = (folder / "llama3_lora_sft.yaml").read_text() + "run_notes:\n"
    record = "  - {{step: {0}, loss: 1.2345, grad_norm: 0.5, tokens_per_s: 3200.5}}\n"
    lines, size, step = [head], len(head), 0
    while size < megabytes * 1e6:
        lines.append(record.format(step))
        size, step = size + len(lines[-1]), step + 1
    path.write_text("".join(lines))
    return path


async def measure(folder: Path, keystrokes: int, warmup: int, large: Path | None = None) -> list[float]:
    client = LanguageClient("bench", "1")
    arrived: asyncio.Queue = asyncio.Queue()

    @client.feature(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def _published(params: lsp.PublishDiagnosticsParams) -> None:
        arrived.put_nowait((time.perf_counter(), params))

    await client.start_io(sys.executable, "-m", "cfgopt", "server")
    await client.initialize_async(lsp.InitializeParams(capabilities=lsp.ClientCapabilities()))
    client.initialized(lsp.InitializedParams())
    yaml_path = folder / "llama3_lora_sft.yaml"
    uri = yaml_path.as_uri()
    opened = [(folder / "ds_z3_config.json", "json"), (yaml_path, "yaml")]
    for path, language in ([(large, "yaml")] if large is not None else []) + opened:
        client.text_document_did_open(
            lsp.DidOpenTextDocumentParams(
                text_document=lsp.TextDocumentItem(
                    uri=path.as_uri(), language_id=language, version=1, text=path.read_text()
                )
            )
        )
    await _wait(arrived, uri, 1)
    text = yaml_path.read_text()
    line = text.split("\n").index(next(t for t in text.split("\n") if t.startswith("cutoff_len:")))
    times = []
    for version in range(2, keystrokes + warmup + 2):
        digit = str(version % 10)  # cutoff_len: 1024 -> 10240, 10241, ...: one character typed, then replaced
        change = lsp.TextDocumentContentChangePartial(
            range=lsp.Range(
                start=lsp.Position(line=line, character=len("cutoff_len: 1024")),
                end=lsp.Position(line=line, character=len("cutoff_len: 1024") + (1 if version > 2 else 0)),
            ),
            text=digit,
        )
        sent = time.perf_counter()
        client.text_document_did_change(
            lsp.DidChangeTextDocumentParams(
                text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=version), content_changes=[change]
            )
        )
        times.append((await _wait(arrived, uri, version)) - sent)
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return times[warmup:]


async def _wait(arrived: asyncio.Queue, uri: str, version: int) -> float:
    while True:
        at, params = await asyncio.wait_for(arrived.get(), 30)
        if params.uri == uri and params.version == version:
            return at


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keystrokes", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--large-mb", type=float, default=0, help="open a YAML of this size (MB) beside the seed")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "seed"
        shutil.copytree(SEED, folder)
        large = write_large(folder, args.large_mb) if args.large_mb else None
        times = sorted(asyncio.run(measure(folder, args.keystrokes, args.warmup, large)))
    ms = [t * 1000 for t in times]
    p90 = ms[int(len(ms) * 0.9) - 1]
    beside = f", a {args.large_mb:g} MB YAML open beside" if args.large_mb else ""
    print(
        f"{len(ms)} keystrokes after {args.warmup} warm-up{beside}: median {statistics.median(ms):.1f} ms, "
        f"p90 {p90:.1f} ms, max {ms[-1]:.1f} ms (target: under 100 ms)"
    )


if __name__ == "__main__":
    main()
