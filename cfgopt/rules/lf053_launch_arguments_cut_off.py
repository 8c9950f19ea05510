from __future__ import annotations

import re
from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.text.diagnostics import Diagnostic, Edit, Severity
from cfgopt.text.source import Kind, Node

_WHY = {
    "comment": "a commented-out line inside the `\\`-continued command ends it (bash reads a comment to the end of "
    "its line, its `\\` included)",
    "blank": "an empty line inside the `\\`-continued command ends it",
    "no-continuation": "the line before them does not end in `\\`",
}
_FIX = {
    "comment": "Move the commented-out line below the command",
    "blank": "Delete the empty line",
    "no-continuation": "Continue the command with `\\`",
}


class LaunchArgumentsCutOff(Rule):
    code = "LF053"
    name = "launch-arguments-cut-off"
    severity = Severity.WARNING
    kinds = frozenset({Kind.LF_CLI})
    summary = "Arguments written under a launch that bash runs as a command of their own, silently dropped"
    why = (
        "Confidence: certain. A launch written over several lines joins them with a `\\` at each line's end. A "
        "commented-out argument line in the middle (`# --lora_rank 8 \\`) ends the command: bash reads the comment "
        "to the end of its line, its `\\` included, so the newline ends the launch; an empty line or a line "
        "without its `\\` does the same. The lines below then run as a command of their own, named by their "
        "first option (`--bf16: command not found`), after the training, which ran without every one of them."
    )
    fails_when = (
        "The training runs without the arguments below the cut (bash prints `command not found` for them, after "
        "the run ends; with `set -e` the script stops there)."
    )
    evidence = (
        "bash 5.2 manual, 3.1.2.1 Escape Character (`\\`-newline is a line continuation) and 3.1.3 Comments (a "
        "word beginning with `#` causes that word and all remaining characters on that line to be ignored)",
        "reproduced with bash 5.2: `echo a \\` / `# b \\` / `c` prints `a`, then `c: command not found`",
    )
    example = (
        "llamafactory-cli train \\\n  --stage sft \\\n  # --lora_rank 8 \\\n  --bf16 true"
        "   ->  line 3 moved below the command"
    )
    fix_safety = (
        "Unsafe: the commented-out line is moved below the command (an empty line deleted, a missing `\\` added), so "
        "the arguments below it reach the launch again: the run then uses them, which it never did."
    )

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        cut = ctx.source.command.get("cut_off")
        if not cut:
            return
        end, start, stop, why = cut
        text = ctx.source.document.text
        words = " ".join(re.sub(r"\\\r?\n", " ", text[start:stop]).split())
        shown = words if len(words) <= 60 else words[:57] + "..."
        line = ctx.source.document.position(start)[0]
        message = (
            f"`{shown}` (line {line}) never reaches the launch: {_WHY[why]}; bash runs them as a command of their "
            f"own (`{shown.split()[0]}: command not found`) after the job trained without them"
        )
        yield self.at_node(ctx, Node(None, start, stop), message, fix=self._fix(text, end, start, stop, why))

    def _fix(self, text: str, end: int, start: int, stop: int, why: str):
        """One edit from the launch's end over the cut words, so that the words it brings back into the launch are
        the ones the fix names (the fixer refuses a fix that changes keys it does not name)."""
        if why == "no-continuation":
            if "#" in text[end:start].split("\n", 1)[0]:
                return None  # `--out x  # note` then `--lr 1`: a `\\` before the comment would escape a blank
            return self.fix(_FIX[why], [Edit(end, stop, " \\" + text[end:stop])], safe=False)
        first_line = text.index("\n", end) + 1
        kept, moved = [text[end:first_line]], []
        for line in text[first_line:start].splitlines(keepends=True):
            stripped = line.strip()
            if why == "comment" and stripped.startswith("#"):
                moved.append(line.rstrip("\r\n"))  # kept, below the command, where it ends nothing
            elif why == "comment" or stripped or not line.endswith("\n"):  # the cut line's indentation stays
                kept.append(line)
        newline = "\r\n" if "\r\n" in text else "\n"
        after = "".join(newline + line for line in moved)
        return self.fix(_FIX[why], [Edit(end, stop, "".join(kept) + text[start:stop] + after)], safe=False)
