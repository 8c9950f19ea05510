from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.text.diagnostics import Diagnostic, Edit, Severity
from cfgopt.text.source import Kind, Node

_HOW = {
    "cut": "bash reads its `\\` as quoting the CR, not as a continuation, so the launch ends there with {word}",
    "word": "bash reads the CR as part of the word before it, `{joined}`",
    "blank": "bash reads the CR as a word of its own, `$'\\r'`",
}


class LaunchScriptCrlf(Rule):
    code = "LF055"
    name = "launch-script-crlf"
    severity = Severity.ERROR
    kinds = frozenset({Kind.LF_CLI})
    summary = "A launch in a script with CRLF line endings: bash reads each line's CR as part of the command"
    why = (
        "Confidence: certain. bash ends a line at `\\n` only; the CR of a CRLF (Windows) line ending is an ordinary "
        "character to it. So a launch written over several lines with `\\` at each line's end is cut at its first "
        "line: `\\` + CR is no continuation but a quoted CR, the launch runs as `llamafactory-cli train $'\\r'`, and "
        "every line below runs as a command of its own (`--model_name_or_path: command not found`). On a launch's "
        "last line the CR joins the last word (`cfg.yaml` becomes `cfg.yaml\\r`, which `read_args` does not take for "
        "a YAML). LLaMA-Factory then stops on the word it cannot use; where it can (a number: `int()` and `float()` "
        "strip it), nothing fails and nothing is reported; where a text value keeps the CR (`--output_dir out`) or "
        "the lines below are lost while the launch still runs, it is a warning. cfgopt reads the launch's words again "
        "as bash passes them, with the same argparse and `read_args` model as every launch, to say which. The other "
        "rules read the script as it is shown (as the user means it), and no speed plan is made for a launch bash "
        "never gives its arguments."
    )
    fails_when = (
        "At once: LLaMA-Factory stops with a ValueError (HfArgumentParser has no use for the `\\r` word, or a value "
        "the cut launch lacks: `Please provide model_name_or_path`; `read_args` misses a YAML whose name ends in the "
        "CR), argparse rejects a value ending in it (`--bf16 True` + CR), or the launch never starts; run as "
        "`./train.sh`, a `#!` line that ends in a CR names an interpreter that does not exist "
        "(`/usr/bin/env: 'bash\\r'`)."
    )
    evidence = (
        "bash 5.2 manual, 3.1.2.1 Escape Character (only `\\` + newline is a line continuation) and 3.5.7 Word "
        "Splitting (a CR is no separator)",
        "llamafactory v0.9.5 src/llamafactory/hparams/parser.py L90-99 (`read_args`: a YAML only where the word ends "
        "in `.yaml`) and L109-114 (unused arguments raise ValueError); launcher.py L56 (the subcommand word)",
        "reproduced with bash 5.2 and a `llamafactory-cli` that prints its arguments and runs llamafactory 0.9.5's "
        "`get_train_args` on them: `llamafactory-cli train \\` + CRLF passes `train` and `\\r` "
        "(tests/loaders/test_launch_line_endings.py)",
    )
    example = "llamafactory-cli train \\<CR><LF>  --stage sft ...   ->  the file's CRLF line endings turned to LF"
    fix_safety = (
        "Safe: every CR before a line's `\\n` is removed, so bash reads the script as it is shown. No fix where a "
        "heredoc or a string over several lines holds a CRLF line (their text would change: check them, then convert "
        "the file, e.g. `sed -i 's/\\r$//' train.sh`)."
    )

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        found = ctx.source.command.get("carriage_return")
        if found is None or not (found.failure or found.value or found.dropped):
            return  # no CR reaches the launch, or one that changes nothing (a number's CR: int() strips it)
        doc = ctx.source.document
        line = doc.position(found.at)[0]
        word = f"`{found.word!r}`" if found.word else "a word `$'\\r'`"
        how = _HOW[found.how].format(word=word, joined=found.word.replace("\r", "\\r"))
        message = f"line {line} ends in a CR (the script has CRLF line endings): {how}"
        if found.failure:
            message += f"; {found.failure}"
        elif found.value:
            message += f"; the launch runs with `{found.value}` ending in a CR"
        if found.dropped:
            message += f"; the lines below run as commands of their own (`{found.dropped}: command not found`)"
        if doc.text.startswith("#!") and doc.text.split("\n", 1)[0].endswith("\r"):
            message += "; run as a program, its `#!` line names an interpreter whose name ends in a CR"
        fix = self._fix(ctx)
        if fix is None:
            message += "; no fix: a heredoc or a string over several lines holds a CRLF line too"
        end = found.at if found.start < found.at else found.at + 1
        severity = Severity.ERROR if found.failure else Severity.WARNING
        yield self.at_node(ctx, Node(None, found.start, end), message, severity=severity, fix=fix)

    def _fix(self, ctx: Context):
        """Every CRLF turned to LF, or None where one stands in a heredoc or a string over lines (its text)."""
        from cfgopt.loaders import shell

        text = ctx.source.document.text
        layout = shell.scan(text).layout
        breaks, i = [], text.find("\r\n")
        while i >= 0:
            breaks.append(i)
            i = text.find("\r\n", i + 2)
        if any(layout.in_opaque(i) or layout.in_opaque(i + 1) for i in breaks):
            return None
        return self.fix("Convert the line endings to LF", [Edit(i, i + 1, "") for i in breaks], safe=True)
