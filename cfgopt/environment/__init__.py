"""The environment a job trains in and the machine cfgopt runs on, read from files, never by importing the packages:
the environment the project states for the job (`stated`: `Environment`, what the rules and the planner ask), the
repository's dependency pins (`pins`: the releases that judge a config), this machine's GPUs from /proc and /sys
(`gpus`: the target when none is stated), and the node's installed stack (`node`: what `cfgopt doctor` checks).
`cfgopt.knowledge` keeps the facts they are judged against."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from cfgopt.text.requirements import normalise

HOW_TO_STATE = "--environment FILE, or `cfgopt doctor --write-environment` on the node"

# Import name (what `Job.has_package` is asked) -> distribution name (what requirement files list).
DISTRIBUTIONS = {
    "liger_kernel": "liger-kernel",
    "flash_attn": "flash-attn",
    "bitsandbytes": "bitsandbytes",
    "torchao": "torchao",
    "deepspeed": "deepspeed",
}


class Environment(NamedTuple):
    """The packages of the node a job trains on: normalised name -> version or specifier ("" where unstated)."""

    packages: dict[str, str]
    source: str  # as outputs name it: "requirements.txt", "--environment env.json", "assumed: ..."
    assumed: bool = False
    # a requirements*.txt the job installs from: where an unsafe fix adds a pin the plan needs
    requirement_file: Path | None = None
    explicit: bool = False  # named by `--environment` or the project config: its releases beat the repository's pins
    # what a node has installed (a `cfgopt doctor` snapshot, or probed by verify/tune there), not what a requirement
    # file asks pip for: its builds are the node's own, so a pin's build is not judged (ENV001's question)
    installed: bool = False

    def has(self, name: str) -> bool:
        """Is the package (import or distribution name) in the environment?"""
        return normalise(DISTRIBUTIONS.get(name, name)) in self.packages

    @property
    def where(self) -> str:
        """The environment as a sentence names it: `requirements.txt`, or `the assumed environment`."""
        return "the assumed environment" if self.assumed else self.source

    def describe(self) -> str:
        """`environment: requirements.txt` / `environment: assumed: ... (--environment FILE)` (summary lines,
        --show-settings, plans)."""
        return f"environment: {self.source}" + (f" ({HOW_TO_STATE})" if self.assumed else "")
