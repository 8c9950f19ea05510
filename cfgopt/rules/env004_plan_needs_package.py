from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

from cfgopt.environment.stated import spec_for
from cfgopt.project.launch_jobs import launch_line
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.requirements import pins_of
from cfgopt.text.diagnostics import Diagnostic, Edit, Severity
from cfgopt.text.document import real_path
from cfgopt.text.source import Kind, Source


class PlanNeedsPackage(Rule):
    code = "ENV004"
    name = "plan-needs-package"
    severity = Severity.WARNING
    kinds = frozenset({Kind.REQUIREMENTS})
    summary = "The job's requirement file lacks a package its speed plan would use to be notably faster"
    why = (
        "Confidence: likely (tune's priors, measured on an H200). The speed plan (`cfgopt fix --unsafe-fixes`) is "
        "made for the job's environment: when the requirement file it installs from names LLaMA-Factory but not "
        "liger-kernel or bitsandbytes, the plan cannot turn on Liger's fused kernels or 8-bit AdamW, and a full "
        "fine-tune whose AdamW states do not fit keeps a slow ZeRO-3 on one GPU (92 tokens/s on the H200 against "
        "5,884 with 8-bit AdamW and no DeepSpeed; Liger alone was 1.15x on a Qwen2.5-7B LoRA SFT). Reported where "
        "the plan with the package is expected at least 5% faster than the plan without it, for a LLaMA-Factory "
        "config of the same run at or below the file's folder whose environment this file is."
    )
    fails_when = "Never fails: the job runs slower than the same node could run it."
    evidence = (
        "bench/planner/README.md (the plans measured on the H200: fix output vs tune's winner)",
        "LLaMA-Factory 0.9.5 requirements/liger-kernel.txt (liger-kernel>=0.6.3), requirements/bitsandbytes.txt "
        "(bitsandbytes>=0.39.0): the documented extras the pin takes its range from",
    )
    example = "requirements.txt: llamafactory==0.9.5  ->  + liger-kernel>=0.6.3  (a Llama LoRA SFT config below)"
    fix_safety = (
        "Unsafe: adds a pin with the range LLaMA-Factory's release documents for the extra (requirements*.txt "
        "only), on a line of its own (after an empty line where the file ends in a `\\` continuation, which pip "
        "would join it to) in the file's line endings; the node must then install it. No fix in a hash-checking "
        "file (`--hash`, `--require-hashes`): pip refuses a pin without hashes there, and with it the whole file. "
        "A file pip decodes as other than UTF-8 (UTF-16 by its byte order mark, latin-1 by its coding comment) is "
        "not written: `cfgopt fix` writes UTF-8, so it says why and leaves the file byte for byte."
    )

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        src = ctx.source
        if src.root is None:
            return
        for config in ctx.consumers:
            plan = _plan_of(ctx, config)
            if plan is None or plan.with_packages is None:
                continue
            from cfgopt.plan.wording import with_packages_words  # only with a plan: it loads tune's priors

            more = plan.with_packages
            anchor = next(iter(pins_of(ctx, ("llamafactory", "llama_factory"))), None)
            message = f"{_job_named(config, src)}: {with_packages_words(more, 'this file')}"
            yield (
                self.at_entry(ctx, anchor, message, fix=self._fix(ctx, more.packages))
                if anchor is not None
                else self.at_node(ctx, src.root, message, fix=self._fix(ctx, more.packages))
            )
            return  # one finding per file: the first config's plan names the packages

    def _fix(self, ctx: Context, packages: list[str]):
        """Append the pins to a requirements*.txt (a TOML manifest or lock file is not edited), as lines of their
        own in the file's line endings. None in a file pip reads in hash-checking mode (a `--hash` or
        `--require-hashes` anywhere): a pin without its hashes makes pip refuse the whole file."""
        src = ctx.source
        if not src.document.path.name.endswith(".txt"):
            return None
        text = src.document.text
        if _HASH_CHECKING.search(text):
            return None
        newline = "\r\n" if "\r\n" in text else "\n"
        version = ctx.settings.llamafactory_version
        lines = "".join(f"{package}{spec_for(package, version)}{newline}" for package in packages)
        last = text.splitlines()[-1] if text.strip() else ""
        sep = "" if not text or text.endswith(("\n", "\r")) else newline
        if last.endswith("\\"):  # pip joins a line ending in `\\` with the next: an empty line ends the joining
            sep += newline
        return self.fix(f"Add {', '.join(packages)}", [Edit(len(text), len(text), sep + lines)], safe=False)


def _job_named(config: Source, requirements: Source) -> str:
    """The job whose plan it is, as the message names it: its config (relative to the requirement file's folder,
    where all its consumers are), and for a launch line how it is launched (`configs/sft.yaml as train.sh line 5
    launches it`); a line that names no YAML is the job itself (`the job train.sh line 5 launches`)."""
    folder = real_path(requirements.document.path).parent
    if config.kind != Kind.LF_CLI:
        return _relative(config, folder)
    script = f"{_relative(config, folder)} line {launch_line(config)}"
    base = config.command.get("base")
    if base is None:
        return f"the job {script} launches"
    return f"{_relative(base, folder)} as {script} launches it"


def _relative(source: Source, folder: Path) -> str:
    return Path(os.path.relpath(real_path(source.document.path), folder)).as_posix()


# pip's hash-checking mode: on for the whole install when any requirement carries `--hash` (or the option is given)
_HASH_CHECKING = re.compile(r"(^|\s)--(hash[=\s]|require-hashes)", re.MULTILINE)


def _plan_of(ctx: Context, config):
    """The config's plan, where its environment is this requirement file."""
    from cfgopt.plan.planner import plan_for
    from cfgopt.plan.speed_knobs import OWNERS

    job = ctx.job_of_consumer(config)
    env_file = job.environment.requirement_file
    if env_file is None or os.path.realpath(env_file) != os.path.realpath(ctx.source.document.path):
        return None
    return plan_for(job, tuple(OWNERS))  # every knob: the plan as the default selection makes it
