"""The shipped schema snapshots, as the lint path uses them (no real packages needed)."""

from __future__ import annotations

from cfgopt.knowledge import schema, schema_validators


def test_every_deepspeed_validator_is_implemented_or_explained() -> None:
    ds = schema.deepspeed()
    known = (
        set(schema_validators.FIELD_VALIDATORS)
        | set(schema_validators.MODEL_VALIDATORS)
        | set(schema_validators.NOT_ERRORS)
    )
    for model, spec in ds.raw_models.items():
        validators = spec.get("validators", {})
        for name in list(validators.get("field", {})) + list(validators.get("model", [])):
            assert f"{model}.{name}" in known, f"DeepSpeed validator {model}.{name} is not handled"


def test_every_strict_section_builds_a_validator() -> None:
    ds = schema.deepspeed()
    for model in set(ds.sections.values()):
        assert ds.model(model) is not None


def test_alias_and_field_name_both_given_is_rejected_like_deepspeed() -> None:
    from cfgopt.rules.support.deepspeed import validate_section

    problems = validate_section("DeepSpeedZeroConfig", {"stage3_prefetch_bucket_size": 1, "prefetch_bucket_size": 1})
    assert problems and problems[0][1] == "extra_forbidden"
    assert validate_section("DeepSpeedZeroConfig", {"stage": "3", "stage3_prefetch_bucket_size": 5e8}) == []


def test_lint_path_does_not_import_the_real_tools() -> None:
    import subprocess
    import sys

    code = (
        "import sys; from cfgopt.cli import main; main(['lint', '--exit-zero', 'fixtures/seed']); "
        "heavy = ('torch', 'transformers', 'llamafactory', 'deepspeed', 'pydantic.main'); "
        "bad = [m for m in heavy if m in sys.modules]; "
        "print(bad); raise SystemExit(1 if bad else 0)"
    )
    from rule_cases import ROOT

    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
