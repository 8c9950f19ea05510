from __future__ import annotations

from collections.abc import Iterator

from cfgopt.rules.base import Context, Rule
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.requirements.versions import version_key
from cfgopt.text.source import Kind

# The first release whose `_parse_args` also reads a `.yml` file (0.9.0 reads `.yaml` only).
FIRST_READING_YML = (0, 9, 1)


class YmlExtensionUnread(Rule):
    code = "LF038"
    name = "yml-extension-unread"
    severity = Severity.ERROR
    kinds = frozenset({Kind.LF_TRAIN, Kind.LF_INFER})
    summary = "A `.yml` config judged with LLaMA-Factory 0.9.0 (which reads only `.yaml`), or a `.YAML` name"
    why = (
        "Confidence: certain. LLaMA-Factory 0.9.0's `_parse_args` loads the argument as a config file only when "
        "its name ends in `.yaml` (or `.json`); `cfg.yml` is handed to argparse instead, which stops on the "
        "required arguments it did not get (`--output_dir`). 0.9.1 and later read `.yml` too, so this fires "
        "only when 0.9.0 is the release judged (`--llamafactory-version 0.9.0` or a pin). The test is "
        "case-sensitive in every release: `cfg.YAML` is never read as a config."
    )
    fails_when = "At start-up (`_parse_args`): `the following arguments are required: --output_dir` (exit 2)."
    evidence = (
        'llamafactory 0.9.0 hparams/parser.py `_parse_args` (`sys.argv[1].endswith(".yaml")`)',
        "llamafactory 0.9.1 hparams/parser.py `_parse_args` (`.yaml` or `.yml`)",
        "confirmed with llamafactory 0.9.0 / transformers 4.45.0: `llamafactory-cli train train.yml` exits 2",
    )
    example = "llamafactory-cli train sft.yml   (0.9.0)  ->  rename it sft.yaml"
    fix_safety = "No fix: renaming a file is outside a config edit."

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        path = ctx.source.document.path
        if path.suffix.lower() not in (".yml", ".yaml") or path.name.endswith(".yaml"):
            return
        version = ctx.settings.lf_schema.version
        reads_yml = version_key(version)[:3] >= FIRST_READING_YML
        if reads_yml and path.name.endswith(".yml"):
            return
        root = ctx.source.root
        if root is None:
            return
        endings = "`.yaml` or `.yml` (case matters)" if reads_yml else "`.yaml`"
        yield self.at_node(
            ctx,
            root,
            f"LLaMA-Factory {version} reads a config file only when its name ends in {endings}: "
            f"`llamafactory-cli train {path.name}` stops at start-up (the file is never read: "
            "`the following arguments are required: --output_dir`); "
            "rename it to `.yaml`",
        )
