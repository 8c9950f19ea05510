from __future__ import annotations

from collections.abc import Iterator

from cfgopt.knowledge import schema
from cfgopt.knowledge.versions import release_spans
from cfgopt.loaders import edits
from cfgopt.rules.base import Context, Rule
from cfgopt.rules.support.llamafactory import entry_of, read_by_argparse
from cfgopt.text.diagnostics import Diagnostic, Severity
from cfgopt.text.source import Kind


def releases_with(name: str) -> list[str]:
    """The shipped LLaMA-Factory releases that register `name` (for "registered by 0.9.4" hints)."""
    return [v for v, snap in schema.llamafactory_versions().items() if snap.templates and name in snap.templates]


def known_templates(ctx: Context) -> frozenset[str] | None:
    """The chat templates of the LLaMA-Factory release judged (its schema snapshot) plus the project's
    `extra-templates`; None when the snapshot does not list them."""
    shipped = ctx.settings.lf_schema.templates
    if shipped is None:
        return None
    return shipped | frozenset(ctx.settings.extra_templates)


class UnknownTemplate(Rule):
    code = "LF035"
    name = "unknown-template"
    severity = Severity.ERROR
    kinds = frozenset({Kind.LF_TRAIN, Kind.LF_INFER, Kind.LF_CLI})
    triggers = frozenset({"template"})
    summary = "A chat `template` the LLaMA-Factory release does not register"
    why = (
        "Confidence: certain for the release judged. Every workflow (pt, sft, rm, ppo, dpo, kto, chat, export, "
        "eval) calls `get_template_and_fix_tokenizer`, which looks the name up in the `TEMPLATES` registry and "
        "raises `Template X does not exist.` after the model's tokenizer is loaded. The parser does not check "
        "the name (`template` is a plain `str`), so nothing fails until then. Names differ between releases "
        "(0.9.5 dropped `baichuan2`, `chatglm2`, `xverse`, ...; added `qwen3_5`, `gemma4`, ...), and forks "
        "register their own (`qwen25`, `videor1`): list those in `extra-templates` in the project configuration."
    )
    fails_when = "After the tokenizer is loaded, before the dataset is read: `ValueError: Template X does not exist.`"
    evidence = (
        "llamafactory 0.9.5 data/template.py L638-639 (`get_template_and_fix_tokenizer`)",
        "the registry per release: `register_template(name=...)` calls in data/template.py, read by "
        "scripts/sync_schemas.py into each LLaMA-Factory snapshot under cfgopt/knowledge/schemas/ (`templates`)",
    )
    example = "template: llama_3      ->  template: llama3"
    fix_safety = (
        "Unsafe: the closest registered name, when one is close (`llama_3` -> `llama3`); a template decides the "
        "prompt format the model is trained on, so check it matches the model. No fix when none is close."
    )

    def check(self, ctx: Context) -> Iterator[Diagnostic]:
        entry = entry_of(ctx, "template")
        if entry is None or entry.node.value is None:
            return
        known = known_templates(ctx)
        if known is None:
            return
        name = (
            entry.node.raw if read_by_argparse(ctx.source, entry) and entry.node.raw is not None else entry.node.value
        )
        if isinstance(name, str) and name in known:
            return
        version = ctx.settings.lf_schema.version
        from cfgopt.text.suggest import closest  # only for an unknown name (start-up)

        guess = closest(str(name), sorted(known), cutoff=0.75)
        elsewhere = releases_with(str(name))
        hint = f" (registered by LLaMA-Factory {release_spans(elsewhere)})" if elsewhere else ""
        hint += f" (did you mean `{guess}`?)" if guess else ""
        message = (
            f"LLaMA-Factory {version} has no chat template `{name}`{hint}: every run stops after loading the "
            f"tokenizer with `Template {name} does not exist.`; if your fork registers it, add it to "
            "`extra-templates` in [tool.cfgopt]"
        )
        fix = None
        if guess:
            fix = self.fix(f"Use `{guess}`", edits.replace_value(ctx.source, entry, guess), safe=False)
        yield self.at_entry(ctx, entry, message, on="value", fix=fix)
