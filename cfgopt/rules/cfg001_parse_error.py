from __future__ import annotations

from collections.abc import Iterator

from cfgopt.loaders.json_loader import COMMENTS_HINT
from cfgopt.rules.base import Context, Rule
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind


class ParseError(Rule):
    code = "CFG001"
    name = "parse-error"
    severity = Severity.ERROR
    kinds = frozenset(Kind)
    summary = "The file cannot be read the way its consumer reads it"
    why = (
        "LLaMA-Factory reads YAML with OmegaConf (YAML 1.1, duplicate keys rejected); the HF Trainer reads the "
        "DeepSpeed JSON with plain `json.load` (no comments, no trailing commas, no BOM). A file that fails "
        "there never starts training. pip reads a requirements*.txt line by line and stops at the first "
        "requirement that is no PEP 508 string (`llamafactory==`, `torch=2.5.1`) or whose marker does not parse: "
        "it installs nothing from the file. A path, URL or archive line is the node's to resolve and is not judged, "
        "nor a legacy specifier pip before 24.1 may still match (`torch>=latest`). DeepSpeed's own loader "
        "(`deepspeed.initialize(config=PATH)`, `--deepspeed_config`) reads a path with hjson, which accepts comments "
        "and trailing commas: a JSON that no config of the run reads is judged as the HF Trainer reads it (as a "
        "LLaMA-Factory `deepspeed:` file is), and the message says so and names both readers, as CFG002 does for a "
        "repeated key."
    )
    fails_when = (
        "At start-up: `OmegaConf.load` or `json.load` raises before any argument is checked; at install: `pip "
        "install -r` stops with `Invalid requirement` (before pip 24.1, a legacy `==` finds no release) or "
        "`InvalidMarker`."
    )
    evidence = (
        "llamafactory 0.9.5 hparams/parser.py `read_args` (OmegaConf.load)",
        "accelerate 1.11 utils/deepspeed.py `HfDeepSpeedConfig` (json.load)",
        "pip 23.2.1 req/constructors.py `parse_req_from_line` (the marker split off and parsed alone, then "
        "`get_requirement`: `Invalid requirement`); tests/text/test_requirements_pip_refuses.py compares it and "
        "packaging 26 (pip 24.1 and later) with cfgopt's reading",
        "deepspeed 0.19.8 runtime/config.py L444 `DeepSpeedConfig` (a path: `hjson.load`)",
    )
    example = '{\n  // ZeRO-2\n  "zero_optimization": {"stage": 2}\n}   ->  remove the comment'
    fix_safety = "No fix: cfgopt does not guess what a broken file meant. Exit code 2."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        err = ctx.source.error
        if err is not None:
            doc = ctx.source.document
            yield Diagnostic(
                document=doc,
                start=err.offset,
                end=err.offset,
                code=self.code,
                name=self.name,
                severity=self.severity,
                message=err.message + _readers(ctx) if COMMENTS_HINT in err.message else err.message,
            )


def _readers(ctx: Context) -> str:
    """Who rejects a JSON's comments or trailing commas: the HF Trainer reading it for a config of the run, or,
    where none reads it, the assumption and the reader that accepts them."""
    if ctx.consumers:
        return f"; the HF Trainer reads the file for {ctx.consumers[0].document.path.name} with json.load"
    return (
        "; no config of the run reads this JSON: judged as the HF Trainer reads a `deepspeed:` file (json.load), "
        "while DeepSpeed's own loader (hjson: `deepspeed.initialize(config=PATH)`, `--deepspeed_config`) accepts "
        "comments and trailing commas"
    )
