from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.text.diagnostics import Diagnostic, Edit, Severity
from cfgopt.text.source import Kind, Node


class LaunchLineRejected(Rule):
    code = "LF044"
    name = "launch-line-rejected"
    severity = Severity.ERROR
    kinds = frozenset({Kind.LF_CLI})
    summary = "A launch line that names a YAML LLaMA-Factory cannot read, or arguments after it that it rejects"
    why = (
        "Confidence: certain. A launch line naming a config (`llamafactory-cli train cfg.yaml ...`) is read by "
        "`read_args`: the YAML must exist where the line is launched; LLaMA-Factory 0.9.3 and later read the rest "
        "of the line with `OmegaConf.from_cli`, which takes only `key=value` words: `--template qwen` becomes the "
        "keys `--template` and `qwen`, which HfArgumentParser rejects; 0.9.0-0.9.2 read a YAML only when it is the "
        "only argument, and hand a longer line to argparse, which stops on the YAML's path; 0.9.5 cannot read a "
        "JSON config named on the command line at all."
    )
    fails_when = (
        "At once, before the model is loaded: `FileNotFoundError`, or `ValueError: Some keys are not used ...`."
    )
    evidence = (
        "llamafactory v0.9.5 src/llamafactory/hparams/parser.py L90-97 (`read_args`: "
        "`OmegaConf.from_cli(sys.argv[2:])`, `json.load(Path(...))`), v0.9.3 L63-70, v0.9.2 L64-69 and v0.9.1 "
        "L59-70 (a YAML only with `len(sys.argv) == 2`)",
        "omegaconf 2.4 `merge_with_dotlist`: a word without `=` is a key with the value None",
        "confirmed with llamafactory 0.9.5 `read_args` / `get_train_args` (tests/project/test_launch_jobs.py)",
    )
    example = "llamafactory-cli train cfg.yaml --template qwen   ->  llamafactory-cli train cfg.yaml template=qwen"
    fix_safety = (
        "Unsafe: `--key value` after a YAML rewritten as the `key=value` it meant (the run then uses that value, "
        "where it stopped before). No fix for a missing YAML or for releases before 0.9.3."
    )

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        for start, end, message, replacement in ctx.source.command.get("launch_errors", ()):
            fix = None
            if replacement is not None:
                fix = self.fix(f"Write `{replacement}`", [Edit(start, end, replacement)], safe=False)
            yield self.at_node(ctx, Node(None, start, end), message, fix=fix)
