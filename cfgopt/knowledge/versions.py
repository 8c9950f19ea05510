"""Which LLaMA-Factory / DeepSpeed release judges a config, and what differs between the shipped ones.

Selection (docs/versions.md): an explicit value (`--llamafactory-version` / `--deepspeed-version`, later a
project config) names a shipped snapshot exactly or by prefix (`0.16` = the newest shipped 0.16.x); without
one, the repository's pins or the job's stated environment (cfgopt.environment.stated), snapped to the nearest shipped
snapshot of the same minor; without that, the newest snapshot. The release installed where cfgopt runs never
decides: nothing here reads it (`cfgopt doctor`, run on the node, reads its stack itself).

Differences: the rules ask `lf_key_history` / `ds_key_history` only when a key is unknown to the selected release
(rare: that path reads the other LLaMA-Factory snapshots; for DeepSpeed, the key tables of every release that
`build_ds_keys` precomputes into `cfgopt/knowledge/schemas/ds-keys.json`). What DS090 needs on every DeepSpeed file,
the defaults that differ between releases, is precomputed by `build_index` into
`cfgopt/knowledge/schemas/version-index.json` (written by `scripts/sync_schemas.py`, checked against the snapshots
by tests/knowledge/test_versions.py), so linting reads only the selected snapshot plus that small index.
"""

from __future__ import annotations

import json
import sys
from functools import cache
from pathlib import Path

from cfgopt.knowledge import schema
from cfgopt.knowledge.schema import newest_version, shipped_versions
from cfgopt.text.record import Record
from cfgopt.text.requirements.versions import parse_spec, pip_version, spec_admits, version_key

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

LABELS = {"llamafactory": "LLaMA-Factory", "deepspeed": "DeepSpeed"}
INDEX_FILE = "version-index.json"


class VersionError(ValueError):
    """A requested version has no shipped snapshot (the CLI exits 2 with this message)."""


# --------------------------------------------------------------------------- choosing the version


# How much of a version names a series whose releases share a snapshot: DeepSpeed's patch releases keep the
# config schema (0.16.9 is judged by 0.16.4), LLaMA-Factory's patch releases each change it (0.9.3 != 0.9.4).
SERIES_DEPTH = {"llamafactory": 3, "deepspeed": 2}


def _series(package: str, version: str) -> tuple[int, ...]:
    depth = SERIES_DEPTH.get(package, 2)
    return (*version_key(version), 0, 0, 0)[:depth]


EXAMPLES = {
    "llamafactory": ("0.9", ">=0.9.3,<0.9.6"),
    "deepspeed": ("0.16", ">=0.16,<0.20"),
}
_NOTED: set[tuple[str, str]] = set()


def note(package: str, value: str, message: str) -> None:
    """Say once per run, on stderr, which snapshot judges a version that has none of its own (a development
    version, a post or local build, a release newer than every snapshot): never a silent substitution."""
    if (package, value) not in _NOTED:
        _NOTED.add((package, value))
        sys.stderr.write(f"note: {LABELS.get(package, package)} {value}: {message}\n")


def _pip_version(package: str, value: str) -> str | None:
    """The shipped snapshot that judges a version as pip reports it, with a note; None when it names none.

    `0.9.6.dev0` / `0.9.6rc1` (the development line before 0.9.6): the newest release before it, never 0.9.6
    itself; `0.9.5.post1` / `0.9.5+cu121`: 0.9.5; a release newer than every snapshot: the newest one."""
    parsed = pip_version(value)
    shipped = shipped_versions(package)
    if parsed is None or not shipped:
        return None
    release = parsed.release
    want = version_key(release)
    if want > version_key(shipped[-1]) and not _next_to_newest(package, want, version_key(shipped[-1])):
        return None  # far past every snapshot (`1.0`, `0.13` for LLaMA-Factory): more likely a typo
    if parsed.pre or parsed.dev:
        older = [v for v in shipped if version_key(v) < want]
        if not older:
            return None
        note(
            package,
            value,
            f"a development version before {release}: judged with the {older[-1]} snapshot, the "
            f"release before it (keys added during the {release} development may be reported as unknown)",
        )
        return older[-1]
    if release in shipped:
        if value != release:
            note(package, value, f"judged with the {release} snapshot")
        return release
    if want > version_key(shipped[-1]):
        note(
            package,
            value,
            f"newer than every shipped snapshot: judged with the newest, {shipped[-1]} (keys "
            "added since may be reported as unknown)",
        )
        return shipped[-1]
    return None


def _next_to_newest(package: str, want: tuple[int, ...], newest: tuple[int, ...]) -> bool:
    """A release that can follow the newest snapshot: LLaMA-Factory's next patches (0.9.6, ...), DeepSpeed's next
    minor (0.20.x)."""
    if package == "llamafactory":
        return want[:2] == newest[:2]
    return want[:1] == newest[:1] and (*want, 0, 0)[1] <= (*newest, 0, 0)[1] + 1


def match_version(package: str, value: str) -> str:
    """A shipped version named exactly or by prefix (`0.16` -> newest shipped 0.16.x), or a version as pip
    reports it (`_pip_version`); VersionError otherwise."""
    shipped = shipped_versions(package)
    value = value.strip()
    if value.lower() in ("latest", "newest") and shipped:
        return shipped[-1]
    if value in shipped:
        return value
    matches = [v for v in shipped if v.startswith(value + ".")]
    if matches:
        return matches[-1]
    judged = _pip_version(package, value)
    if judged is not None:
        return judged
    prefix, span = EXAMPLES.get(package, ("0.16", ">=0.16,<0.20"))
    raise VersionError(
        f"no {LABELS.get(package, package)} {value!r} snapshot; shipped: {', '.join(shipped)} "
        f'(a prefix such as {prefix} picks the newest of that series; a range such as "{span}" the newest in it; '
        f"a development version such as {prefix}.99.dev0 the release before it)"
    )


def snap_version(package: str, installed: str) -> str:
    """The shipped snapshot of a release's series (nearest patch); for a series without one, the newest older
    snapshot (the oldest for a release older than every snapshot)."""
    shipped = shipped_versions(package)
    if installed in shipped:
        return installed
    parsed = pip_version(installed)
    if parsed is not None and not parsed.is_release:
        judged = _pip_version(package, installed)  # never the release a development version leads to
        if judged is not None:
            return judged
    want = version_key(installed)
    same = [v for v in shipped if _series(package, v) == _series(package, installed)]
    if not same:
        older = [v for v in shipped if version_key(v) < want]
        return older[-1] if older else shipped[0]

    def distance(v: str) -> tuple[int, tuple[int, ...]]:
        patch = version_key(v)[2:3] or (0,)
        return abs(patch[0] - (want[2:3] or (0,))[0]), tuple(-p for p in version_key(v))  # ties: the newer

    return min(same, key=distance)


# --------------------------------------------------------------------------- version ranges


def is_range(value: str) -> bool:
    """Is a --*-version / project-config value a range (has an operator) rather than a version or prefix?"""
    return any(ch in value for ch in "<>=!~^,*")


class VersionRange(Record):
    """The releases a user's project allows, as written (`spec`) and where (`origin`: a file or an option)."""

    package: str
    spec: str
    origin: str

    def admits(self, version: str) -> bool:
        return spec_admits(self.spec, version)

    @property
    def exact(self) -> bool:
        clauses = parse_spec(self.spec)
        return len(clauses) == 1 and clauses[0][0] in ("==", "===") and not clauses[0][1].endswith(".*")

    def shipped(self) -> tuple[str, ...]:
        """The shipped snapshots whose series the range reaches (a series counts when any of its first
        releases is admitted: `<0.16.5` reaches 0.16, judged by the 0.16.4 snapshot), oldest first. An exact pin
        of a development or pre-release (`==0.9.2.dev0`) reaches the snapshot that judges it, the release
        before (`_pip_version`), not the release it leads to, which a comparison of release numbers admits."""
        clauses = parse_spec(self.spec)
        if self.exact and (parsed := pip_version(clauses[0][1])) and (parsed.pre or parsed.dev):
            judged = _pip_version(self.package, clauses[0][1])
            return (judged,) if judged is not None else ()
        return _shipped_in(self.package, self.spec)

    def describe(self) -> str:
        return f"{self.origin}: {LABELS.get(self.package, self.package)} {self.spec}"


@cache
def _shipped_in(package: str, spec: str) -> tuple[str, ...]:
    rng = VersionRange(package, spec, "")
    out = []
    for v in shipped_versions(package):
        series = _series(package, v)
        tries = [series] if len(series) >= 3 else [(*series, p) for p in range(40)]
        if any(rng.admits(".".join(map(str, t))) for t in tries):
            out.append(v)
    return tuple(out)


def judged_releases(version: str, rng: VersionRange | None) -> tuple[str, ...]:
    """The shipped snapshots a job is judged for: those its project's range reaches where that is wider than one
    release (`llamafactory>=0.9.3`: 0.9.3, 0.9.4 and 0.9.5), else the selected one, `version` (an exact pin, an
    explicit `--*-version`, or none stated). A rule whose failure exists in some releases only fires where one of
    these has it, and names them where the range is wider."""
    if rng is not None and not rng.exact:
        reached = rng.shipped()
        if reached:
            return reached
    return (version,)


def resolve_range(rng: VersionRange) -> str:
    """The snapshot that judges a project pinned to `rng`: an exact pin snaps to its series; a range gets the
    newest shipped series it reaches (what a fresh install picks); a range below or above every snapshot gets
    the nearest one."""
    if rng.exact:
        return snap_version(rng.package, parse_spec(rng.spec)[0][1])
    reached = rng.shipped()
    if reached:
        return reached[-1]
    shipped = shipped_versions(rng.package)
    lows = [bound for op, bound in parse_spec(rng.spec) if op in ("<", "<=")]
    if lows and all(version_key(b) <= version_key(shipped[0]) for b in lows):
        return shipped[0]
    return shipped[-1]


def resolve_version(package: str, cli_value: str | None = None, installed: str | None = None) -> str:
    """The version whose snapshot judges the files: explicit value > `installed` (a release the caller read on
    the node: `cfgopt doctor`'s stack) > newest shipped.

    `cli_value` is what the user asked for (command line, or a project config file): a version, a prefix or a
    range (`>=0.16,<0.20`: the newest shipped series in it). Raises VersionError for an explicit value
    that matches no shipped snapshot. `choose` adds the repository's dependency pins between the two.
    """
    if cli_value:
        if is_range(cli_value):
            return explicit_range(package, cli_value, "--version").version
        return match_version(package, cli_value)
    if installed:
        return snap_version(package, installed)
    return newest_version(package)


class Choice(Record):
    """Which snapshot judges the files, and the range of releases the user's project allows (None: unknown;
    DS090 compares the defaults of the releases in it)."""

    version: str
    range: VersionRange | None = None


def explicit_range(package: str, value: str, origin: str) -> Choice:
    """A range given as an option (`deepspeed-version = ">=0.16,<0.20"`): VersionError when it reaches no
    shipped snapshot or cannot be read."""
    rng = VersionRange(package, value.strip(), origin)
    try:
        reached = rng.shipped()
    except ValueError as exc:
        raise VersionError(f"{value!r}: {exc}") from None
    if not reached:
        shipped = shipped_versions(package)
        raise VersionError(
            f"{value!r} reaches no shipped {LABELS.get(package, package)} snapshot; shipped: {', '.join(shipped)}"
        )
    return Choice(reached[-1], rng)


def choose(package: str, value: str | None, origin: str, pinned: VersionRange | None, installed: str | None) -> Choice:
    """explicit option (version, prefix or range) > the repository's dependency pins > installed > newest."""
    if value:
        if is_range(value):
            return explicit_range(package, value, origin)
        return Choice(match_version(package, value))
    if pinned is not None:
        try:
            return Choice(resolve_range(pinned), pinned)
        except ValueError:  # a specifier cfgopt cannot read: ignore the pin rather than stop the lint
            pass
    return Choice(resolve_version(package, None, installed))


# --------------------------------------------------------------------------- wording


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def release_spans(versions: list[str], tag=lambda v: v) -> str:
    """`versions` (shipped ones, any package), with three or more consecutive snapshots shown as a span:
    "0.14.5 to 0.18.9", "0.9.0 (transformers 4.45.0) to 0.9.4 (transformers 4.57.1)"."""
    package = next((p for p in LABELS if versions and versions[0] in shipped_versions(p)), None)
    order = {v: i for i, v in enumerate(shipped_versions(package))} if package else {}
    parts: list[str] = []
    run: list[str] = []
    for v in [*versions, None]:
        if v is not None and run and order.get(v, -9) == order.get(run[-1], -9) + 1:
            run.append(v)
            continue
        if len(run) >= 3:
            parts.append(f"{tag(run[0])} to {tag(run[-1])}")
        else:
            parts += [tag(r) for r in run]
        run = [v] if v is not None else []
    return _join(parts) if parts else ""


def _split(versions: list[str], selected: str) -> tuple[list[str], list[str]]:
    key = version_key(selected)
    return [v for v in versions if version_key(v) < key], [v for v in versions if version_key(v) > key]


def _history(label: str, key: str, valid: list[str], selected: str, tag=lambda v: v) -> str:
    """`key` is valid in the shipped releases `valid` but not in `selected`: say when it came or went."""
    older, newer = _split(valid, selected)
    these = release_spans(valid, tag)
    if newer and not older:
        return f"`{key}` was added after {label} {tag(selected)}: valid in {these}"
    if older and not newer:
        return f"`{key}` is valid in {label} {these} but was removed by {tag(selected)}"
    return f"`{key}` is valid in {label} {these}, not in {tag(selected)}"


# --------------------------------------------------------------------------- LLaMA-Factory


def lf_key_history(key: str, group: str, selected: str) -> str | None:
    """Why `key` is unknown to LLaMA-Factory `selected` when another shipped release accepts it (else None)."""
    valid = [
        v for v in shipped_versions("llamafactory") if v != selected and key in schema.llamafactory(v).group(group)
    ]
    if not valid:
        return None
    tf = {v: schema.llamafactory(v).transformers for v in [*valid, selected]}
    owners = {c for v in valid for c in schema.llamafactory(v).fields[key].dataclasses}
    # LLaMA-Factory's TrainingArguments (0.9.2+) or HF's Seq2SeqTrainingArguments (0.9.0, 0.9.1)
    if len(set(tf.values())) == 1 or not any(o.endswith("TrainingArguments") for o in owners):
        return _history("LLaMA-Factory", key, valid, selected)
    # TrainingArguments fields come and go with transformers, whose version each snapshot records
    return _history("LLaMA-Factory", key, valid, selected, tag=lambda v: f"{v} (transformers {tf[v]})")


# --------------------------------------------------------------------------- DeepSpeed


def _field(spec: dict[str, Any], part: str) -> dict[str, Any] | None:
    fields = spec.get("fields", {})
    return fields.get(part) or next((f for f in fields.values() if f.get("alias") == part), None)


def ds_key_status(ds: schema.DeepSpeedSchema | KeyTable, dotted: str) -> str:
    """How DeepSpeed `ds.version` treats a dotted config key: "known" (read or a model field), "removed"
    (rejected with a removal message), "rejected" (a strict model forbids it) or "ignored" (never read)."""
    parts = dotted.split(".")
    top = parts[0]
    if top in ds.removed_top_level:
        return "removed"
    if len(parts) == 1:
        return "known" if top in ds.top_level_keys or top in ds.sections else "ignored"
    if top == "zero_optimization" and len(parts) == 2 and parts[1] in ds.removed_zero:
        return "removed"
    for cut in range(len(parts) - 1, 0, -1):
        section = ".".join(parts[:cut])
        if section not in ds.sections:
            continue
        model = ds.sections[section]
        rest = parts[cut:]
        for i, part in enumerate(rest):
            spec = ds.raw_models.get(model, {})
            field = _field(spec, part)
            if field is None:
                return "rejected" if spec.get("extra", "forbid") == "forbid" else "ignored"
            if i == len(rest) - 1 or not field.get("model"):
                return "known"  # the field itself, or free content under a dict field
            model = field["model"]
    if dotted in ds.plain_reads or dotted in ds.plain_defaults:
        return "known"
    if any(dotted.startswith(read + ".") for read in ds.plain_reads):
        return "known"  # inside a sub-block a plain reader hands on whole (data_efficiency.data_sampling, ...)
    return "ignored"


# --------------------------------------------------------------------------- the keys of every release (precomputed)

KEYS_FILE = "ds-keys.json"


def _key_table(doc: dict[str, Any]) -> dict[str, Any]:
    """What `ds_key_status` reads of one DeepSpeed snapshot: its sections and top-level keys, the keys it
    removed, its plain reads and, per model, each field's alias and sub-model and the model's `extra`."""

    def field(spec: dict[str, Any]) -> dict[str, Any]:
        # never empty where the snapshot's is not: `_field` takes an empty spec for a missing field
        return {k: spec.get(k) for k in ("alias", "model") if k in spec} or ({"model": None} if spec else {})

    models = {
        name: {
            **({"extra": spec["extra"]} if "extra" in spec else {}),
            "fields": {fname: field(f) for fname, f in spec.get("fields", {}).items()},
        }
        for name, spec in doc["models"].items()
    }
    return {
        "version": doc["version"],
        "models": models,
        "sections": doc["sections"],
        "top_level_keys": doc["top_level_keys"],
        "removed_top_level": sorted(doc.get("removed_top_level", {})),
        "removed_zero": sorted(doc.get("removed_zero", {})),
        "plain_reads": doc.get("plain_reads", []),
        "plain_defaults": sorted(doc.get("plain_defaults", {})),
    }


def build_ds_keys(schema_dir: Path = schema.SCHEMA_DIR) -> dict[str, Any]:
    """`_key_table` of every DeepSpeed snapshot in `schema_dir`, by version (`releases`): the history of an unknown
    key reads this one file, not every snapshot (written by `scripts/sync_schemas.py`, checked by
    tests/knowledge/test_versions.py). A model that several releases share (30 distinct of 87) is written once, in
    `models` under `name@the oldest release that has it`, and a release's `models` names it: the file a lint with an
    unknown DeepSpeed key parses is about half what it was (its dicts are what parsing it costs)."""
    files = sorted(schema_dir.glob("deepspeed-*.json"), key=lambda p: version_key(p.stem.split("-", 1)[1]))
    models: dict[str, Any] = {}
    releases: dict[str, Any] = {}
    for p in files:
        version, table = p.stem.split("-", 1)[1], _key_table(json.loads(p.read_text(encoding="utf-8")))
        names: dict[str, str] = {}
        for name, spec in table["models"].items():
            same = (ref for ref, shared in models.items() if ref.split("@")[0] == name and shared == spec)
            names[name] = next(same, f"{name}@{version}")
            models.setdefault(names[name], spec)
        releases[version] = {**table, "models": names}
    return {"models": models, "releases": releases}


class KeyTable:
    """The parts of a `schema.DeepSpeedSchema` that `ds_key_status` reads, from `KEYS_FILE`: one release's table,
    its models looked up in the file's shared `models`."""

    def __init__(self, table: dict[str, Any], models: dict[str, Any]) -> None:
        self.version: str = table["version"]
        self.raw_models: dict[str, Any] = {name: models[ref] for name, ref in table["models"].items()}
        self.sections: dict[str, str] = table["sections"]
        self.top_level_keys = set(table["top_level_keys"])
        self.removed_top_level = set(table["removed_top_level"])
        self.removed_zero = set(table["removed_zero"])
        self.plain_reads = set(table["plain_reads"])
        self.plain_defaults = set(table["plain_defaults"])


@cache
def _ds_keys() -> dict[str, Any]:
    return json.loads((schema.SCHEMA_DIR / KEYS_FILE).read_text(encoding="utf-8"))


@cache
def ds_keys(version: str) -> KeyTable:
    """The keys DeepSpeed `version` reads, for `ds_key_status` (without reading its snapshot)."""
    keys = _ds_keys()
    return KeyTable(keys["releases"][version], keys["models"])


def ds_valid_in(dotted: str, selected: str) -> list[str]:
    """The other shipped DeepSpeed releases that read `dotted`, oldest first."""
    return [v for v in shipped_versions("deepspeed") if v != selected and ds_key_status(ds_keys(v), dotted) == "known"]


def ds_removed_history(dotted: str, selected: str) -> str | None:
    """For a key DeepSpeed `selected` rejects as removed: which older shipped releases still read it."""
    older = [v for v in ds_valid_in(dotted, selected) if version_key(v) < version_key(selected)]
    if not older:
        return None
    return f"after {older[-1]}: {release_spans(older)} still read{'s' * (len(older) == 1)} it"


def ds_key_history(dotted: str, selected: str) -> str | None:
    """Why DeepSpeed `selected` does not accept `dotted` when another shipped release does (else None)."""
    others = [v for v in shipped_versions("deepspeed") if v != selected]
    status = {v: ds_key_status(ds_keys(v), dotted) for v in others}
    valid = [v for v in others if status[v] == "known"]
    if valid:
        text = _history("DeepSpeed", dotted, valid, selected)
        ignored = [v for v in others if status[v] == "ignored"]
        return text + (f" ({release_spans(ignored)} ignore{'s' * (len(ignored) == 1)} it)" if ignored else "")
    own = ds_key_status(ds_keys(selected), dotted)
    ignored = [v for v in others if status[v] == "ignored"]
    if own in ("rejected", "removed") and ignored:
        rejecting = [v for v in others if status[v] in ("rejected", "removed")] + [selected]
        rejecting.sort(key=version_key)
        return (
            f"`{dotted}` passes DeepSpeed {release_spans(ignored)}, which ignore{'s' * (len(ignored) == 1)} it, "
            f"but is rejected by {release_spans(rejecting)}"
        )
    return None


# --------------------------------------------------------------------------- changed defaults (the index)


def _ds_defaults(doc: dict[str, Any]) -> dict[str, Any]:
    """Every dotted key of one DeepSpeed snapshot with the default DeepSpeed applies when it is absent."""
    out: dict[str, Any] = dict(doc.get("plain_defaults", {}))
    models = doc["models"]

    def visit(prefix: str, model: str, seen: tuple[str, ...]) -> None:
        if model in seen:
            return
        for name, field in models[model]["fields"].items():
            if field.get("deprecated"):
                continue  # an old spelling of another field: its own default means nothing
            path = f"{prefix}.{field.get('alias') or name}"
            if field.get("model"):
                visit(path, field["model"], (*seen, model))
            else:
                out[path] = field.get("default")

    for section, model in doc["sections"].items():
        visit(section, model, ())
    return out


def _lf_defaults(doc: dict[str, Any]) -> dict[str, Any]:
    return {name: spec.get("default") for name, spec in doc["fields"].items() if not spec.get("required")}


def _changed(per_version: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Keys whose default differs between two releases that both know them: {key: {version: default}}."""
    keys = sorted({k for defaults in per_version.values() for k in defaults})
    out: dict[str, dict[str, Any]] = {}
    for key in keys:
        seen = {v: d[key] for v, d in per_version.items() if key in d}
        if len({json.dumps(x, sort_keys=True) for x in seen.values()}) > 1:
            out[key] = seen
    return out


def build_index(schema_dir: Path = schema.SCHEMA_DIR) -> dict[str, Any]:
    """What differs between the snapshots in `schema_dir`, computed from them alone (no package needed)."""
    index: dict[str, Any] = {}
    for package, defaults_of in (("llamafactory", _lf_defaults), ("deepspeed", _ds_defaults)):
        files = sorted(schema_dir.glob(f"{package}-*.json"), key=lambda p: version_key(p.stem.split("-", 1)[1]))
        docs = {p.stem.split("-", 1)[1]: json.loads(p.read_text(encoding="utf-8")) for p in files}
        index[package] = {
            "versions": list(docs),
            "changed_defaults": _changed({v: defaults_of(doc) for v, doc in docs.items()}),
        }
    return index


@cache
def index() -> dict[str, Any]:
    return json.loads((schema.SCHEMA_DIR / INDEX_FILE).read_text(encoding="utf-8"))


def ds_changed_defaults(selected: str) -> dict[str, dict[str, Any]]:
    """Dotted DeepSpeed keys known to `selected` whose default is different in another shipped release:
    {key: {version: default}} (only releases that know the key)."""
    return {
        key: seen
        for key, seen in index()["deepspeed"]["changed_defaults"].items()
        if selected in seen and any(d != seen[selected] for d in seen.values())
    }
