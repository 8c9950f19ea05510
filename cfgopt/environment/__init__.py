"""The environment a job trains in and the machine cfgopt runs on, read from files, never by importing the packages.

`Environment` (here) is the one answer to "what packages and versions does the job's node have, and where did we
learn it" (`Origin`), whoever asks: the rules and the planner (`Job.environment`), `cfgopt doctor`, `verify` and
`tune`. Each reader builds it: the environment the project states for the job (`stated`: requirement and lock files,
`--environment`, a doctor snapshot, else the assumed default), the node's installed stack that `cfgopt doctor` reads
(`node`: `Stack.environment`), and what the machine `verify` and `tune` run on can import (`probe`:
`environment_of`). Beside them: the repository's dependency pins (`pins`: the releases that judge a config) and this
machine's GPUs from /proc and /sys (`gpus`: the target when none is stated). `Platform` (here too) is what the machine
the runs go to offers, the planner's input: `probe` finds it for `verify` and `tune`, and the lint path's plan
assumes one without importing `probe`. `cfgopt.knowledge` keeps the facts they are judged against."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

from cfgopt.text.record import Record
from cfgopt.text.requirements.requirement import normalise
from cfgopt.text.requirements.versions import parse_spec

HOW_TO_STATE = "--environment FILE, or `cfgopt doctor --write-environment` on the node"

# Import name (what `Job.has_package` is asked) -> distribution name (what requirement files list).
DISTRIBUTIONS = {
    "liger_kernel": "liger-kernel",
    "flash_attn": "flash-attn",
    "bitsandbytes": "bitsandbytes",
    "torchao": "torchao",
    "deepspeed": "deepspeed",
}


class Origin(Enum):
    """Where the packages of the job's node were learned (`Environment.origin`)."""

    STATED = "stated"  # requirement or lock files, `--environment FILE`, the project config's table: what pip is asked
    SNAPSHOT = "snapshot"  # a `cfgopt doctor --write-environment` file, written on the node
    INSTALLED = "installed"  # the node's dist-info folders, read there by `cfgopt doctor`
    PROBED = "probed"  # imported on the node by the child process of `verify` / `tune` (no versions)
    ASSUMED = "assumed"  # nothing stated: what LLaMA-Factory's release installs for the target's platform


def package_key(name: str) -> str:
    """An import or distribution name as `Environment.packages` keys it."""
    return normalise(DISTRIBUTIONS.get(name, name))


class Environment(Record):
    """The packages of the node a job trains on and where they were learned: normalised distribution name ->
    specifier (`==2.5.1+rocm6.2` installed or pinned, `>=0.6` a range, "" where no version is known)."""

    packages: dict[str, str]
    source: str  # as outputs name it: "requirements.txt", "--environment env.json", "assumed: ..."
    origin: Origin = Origin.STATED
    # a requirements*.txt the job installs from: where an unsafe fix adds a pin the plan needs
    requirement_file: Path | None = None
    explicit: bool = False  # named by `--environment` or the project config: its releases beat the repository's pins
    # a stated file found on the way and not used, and why ("cfgopt-environment.json not used: ..."): said beside it
    passed_over: str = ""

    def has(self, name: str) -> bool:
        """Is the package (import or distribution name) in the environment?"""
        return package_key(name) in self.packages

    def version(self, name: str) -> str | None:
        """The package's exact version as installed or pinned, local label kept (`2.5.1+rocm6.2` for
        `==2.5.1+rocm6.2`); None when it is absent, or only a range or nothing names its version."""
        spec = self.packages.get(package_key(name), "")
        try:
            clauses = parse_spec(spec)
        except ValueError:  # no PEP 440 version (an egg's `1.0_dev`): what a node installed is still its version
            return spec.removeprefix("==") if self.installed and spec.startswith("==") else None
        op, version = clauses[0] if len(clauses) == 1 else ("", "")
        return version if op in ("==", "===") and "*" not in version else None

    @property
    def assumed(self) -> bool:
        """Nothing was stated: the output says what is assumed and how to state it."""
        return self.origin is Origin.ASSUMED

    @property
    def installed(self) -> bool:
        """What the node has installed, not what a requirement file asks pip for: its builds are the node's own, so
        a pin's build is not judged (ENV001's question)."""
        return self.origin in (Origin.SNAPSHOT, Origin.INSTALLED, Origin.PROBED)

    @property
    def where(self) -> str:
        """The environment as a sentence names it: `requirements.txt`, or `the assumed environment`."""
        return "the assumed environment" if self.assumed else self.source

    def describe(self) -> str:
        """`environment: requirements.txt` / `environment: assumed: ... (--environment FILE)` (summary lines,
        --show-settings, plans), then a stated file passed over and why."""
        judged = f"environment: {self.source}" + (f" ({HOW_TO_STATE})" if self.assumed else "")
        return judged + (f"; {self.passed_over}" if self.passed_over else "")


class Platform:
    """What the machine the runs go to offers: the planner's input (`cfgopt.plan.space`), found for `verify` and
    `tune` by `cfgopt.environment.probe.probe_platform` in a child process, assumed by the lint path's plan."""

    def __init__(
        self,
        cuda: bool = False,
        device: str = "cpu",
        gpu_count: int = 0,
        flash_attn: bool = False,
        liger: bool = False,
        deepspeed: bool = False,
        notes: list[str] | None = None,
        bitsandbytes: bool = False,
        torchao: bool = False,
        memory_gib: float = 0.0,
    ) -> None:
        self.cuda, self.device, self.gpu_count = cuda, device, gpu_count
        self.flash_attn, self.liger, self.deepspeed = flash_attn, liger, deepspeed
        self.bitsandbytes = bitsandbytes  # the 8-bit optimizers
        self.torchao = torchao  # its 8-bit AdamW with bf16 stochastic rounding (SR_OPTIM)
        self.memory_gib = memory_gib  # one GPU's memory as torch reports it (0: not known, no CUDA device)
        self.notes: list[str] = list(notes or [])

    def __repr__(self) -> str:
        return f"Platform({', '.join(f'{k}={v!r}' for k, v in vars(self).items())})"
