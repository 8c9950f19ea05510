"""A launch cut in two (LF053): the arguments written under a launch that bash runs as a command of their own,
because a commented-out or blank line, or a line without its `\\`, ended the launch.
"""

from __future__ import annotations

from cfgopt.loaders import shell


def cut_off_arguments(text: str, commands: list[shell.Command], i: int) -> tuple[int, int, int, str] | None:
    """Arguments the launch at `i` was meant to have but bash runs as a command of their own: the next command
    starts with an option word (`--bf16 ...`, a program no one names so), because a commented-out line or a line
    without its `\\` ended the launch. (where the launch ends, the cut words' start and end, why it ended)."""
    launch = commands[i]
    nxt = next((c for c in commands[i + 1 :] if c.depth == 0 and c.start >= launch.end), None)
    if launch.depth or nxt is None or not launch.words:
        return None
    first = nxt.words[0]
    if not (first.literal and first.text.startswith("-") and len(first.text) > 1 and first.text != "--"):
        return None
    between = text[launch.end : nxt.start]
    code = "\n".join(line.partition("#")[0] for line in between.split("\n"))
    if between.count("\n") > _MAX_CUT_LINES or any(op in code for op in ";&|"):
        return None  # `cmd; --x` or a far-away line: not one command cut in two
    lines = between.split("\n")
    comment = any(line.lstrip().startswith("#") for line in lines[1:])
    why = "comment" if comment else "blank" if any(not line.strip() for line in lines[1:-1]) else "no-continuation"
    return launch.end, nxt.start, nxt.end, why


_MAX_CUT_LINES = 4  # the launch's last line, a commented-out or blank line or two, the cut arguments' first
