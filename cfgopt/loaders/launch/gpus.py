"""The GPU count of a launch (`launcher_gpus`, kept as `command["launcher_gpus"]`): the processes per node its
launcher, wrapper, hostfile or visible-devices list states, times the nodes it spans, and what says so.
"""

from __future__ import annotations

import os
import re

from cfgopt.knowledge.targets import MAX_GPUS
from cfgopt.loaders.launch.environment import VISIBLE_DEVICES, ScriptEnvironment
from cfgopt.loaders.launch.options import UNKNOWN_OPTIONS, gpu_count
from cfgopt.loaders.launch.shapes import Launch
from cfgopt.loaders.shell import Word
from cfgopt.text.document import Document
from cfgopt.text.user_files import read_text_bounded
from cfgopt.text.user_text import integer


def launcher_gpus(launch: Launch, environment: ScriptEnvironment, doc: Document) -> tuple[int, str] | None:
    """How many GPUs (processes) the launch starts in all, and what says so; None when unknown. The processes
    per node times the nodes (`--nnodes`, `--num_nodes`, `NNODES`), where both are stated."""
    env = {**environment.exported, **launch.env}
    per_node = _per_node(launch, env, doc)
    if per_node is None:
        return None
    nodes = _nodes(launch, env, doc)
    if nodes is None:
        return per_node
    return per_node[0] * nodes[0], f"{per_node[1]} x {nodes[1]}"


def _per_node(launch: Launch, env: dict[str, Word | None], doc: Document) -> tuple[int, str] | None:
    opts = launch.options
    kind = launch.kind
    if launch.processes is not None and kind == "python":
        return launch.processes  # one rank per process the wrapper starts
    hosts = _hostfile(opts.get("--hostfile"), doc) if kind == "deepspeed" else None
    for option in ("--num_gpus", "--num_accelerators", "--nproc_per_node", "--nproc-per-node", "--num_processes"):
        count = gpu_count(opts.get(option))
        if count is not None and option in opts and not hosts:
            return count, f"`{option} {count}`"
    if UNKNOWN_OPTIONS in opts:
        return None
    hosts = _hostfile(opts.get("--hostfile"), doc) if kind == "deepspeed" and "--include" not in opts else None
    if hosts:
        return _hostfile_gpus(hosts, opts)
    if kind == "deepspeed" and "--include" in opts and opts["--include"].literal:
        hosts = opts["--include"].text.split("@")
        count = sum(len([d for d in h.partition(":")[2].split(",") if d]) for h in hosts)
        if count:
            return count, f"`--include {opts['--include'].text}`"
    if kind == "torchrun" and not any(o in opts for o in ("--nproc_per_node", "--nproc-per-node")):
        return 1, "torchrun's default `--nproc_per_node 1`"
    if kind == "accelerate" and any(o in opts for o in ("--config_file", "--config-file")):
        return None  # the count is in accelerate's config file
    nproc = env.get("NPROC_PER_NODE")
    if kind == "cli" and nproc is not None:
        count = gpu_count(Word(nproc.text.partition("=")[2], 0, 0, nproc.literal))
        if count:
            return count, _where(nproc, doc)
    for name in VISIBLE_DEVICES:
        word = env.get(name)
        if word is not None:
            value = word.text.partition("=")[2]
            devices = [d for d in value.split(",") if d.strip()]
            return (len(devices), _where(word, doc)) if word.literal and devices else None
    return None


_HOSTFILE_LINE = re.compile(r"^(\S+)\s+slots=(\d+)")


def _hostfile(word: Word | None, doc: Document) -> list[tuple[str, int]] | None:
    """The hosts and slots of a `deepspeed --hostfile` kept beside the script (a relative path below its folder,
    read as DeepSpeed's runner reads it: `host slots=N` lines, `#` comments); None when it is not there, not
    readable or not one DeepSpeed would accept (the file on the cluster is then unknown)."""
    if word is None or not word.literal or os.path.isabs(word.text) or ".." in word.text.replace("\\", "/").split("/"):
        return None
    try:
        text = read_text_bounded(doc.path.parent / word.text, 64 * 1024)
    except OSError:
        return None
    hosts: list[tuple[str, int]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = _HOSTFILE_LINE.search(line)
        if match is None or any(host == match.group(1) for host, _ in hosts):
            return None  # DeepSpeed stops on a bad or repeated entry
        hosts.append((match.group(1), integer(match.group(2)) or 0))
    return hosts or None


def _hostfile_gpus(hosts: list[tuple[str, int]], opts: dict[str, Word]) -> tuple[int, str] | None:
    """DeepSpeed's runner over a hostfile (`apply_num_nodes_and_gpus`): the first `--num_nodes` hosts, each with
    `--num_gpus` slots or all of its own."""
    nodes, per_host = gpu_count(opts.get("--num_nodes")), gpu_count(opts.get("--num_gpus"))
    if ("--num_nodes" in opts and nodes is None) or ("--num_gpus" in opts and per_host is None):
        return None
    used = hosts[:nodes] if nodes else hosts
    total = sum(per_host or slots for _, slots in used)
    if not 0 < total <= MAX_GPUS:
        return None
    shown = f"`--hostfile {opts['--hostfile'].text}` ({len(used)} host(s)"
    return total, shown + (f", `--num_gpus {per_host}` each)" if per_host else ")")


def _nodes(launch: Launch, env: dict[str, Word | None], doc: Document) -> tuple[int, str] | None:
    """The nodes a launch spans where more than one is stated (accelerate's `--num_processes` counts every
    machine's already); None for one node or an unknown count."""
    if launch.kind == "deepspeed" and _hostfile(launch.options.get("--hostfile"), doc):
        return None  # the hostfile's hosts are counted already
    options = {"torchrun": ("--nnodes",), "deepspeed": ("--num_nodes",)}.get(launch.kind, ())
    for option in options:
        count = gpu_count(launch.options.get(option))
        if count is not None and count > 1:
            return count, f"`{option} {count}`"
    word = env.get("NNODES")
    if launch.kind == "cli" and word is not None:
        count = gpu_count(Word(word.text.partition("=")[2], 0, 0, word.literal))
        if count is not None and count > 1:
            return count, _where(word, doc)
    return None


def _where(word: Word, doc: Document) -> str:
    return f"`{word.text}` (line {doc.position(word.start)[0]})"
