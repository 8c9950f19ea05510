#!/usr/bin/env python
"""Snapshot the optimizer and LR-scheduler names and keyword arguments a DeepSpeed `optimizer` / `scheduler` block
may use, for each supported DeepSpeed release: cfgopt/knowledge/schemas/ds-optimizers.json, read by DS025 (not named
`deepspeed-*.json`: that prefix lists the release snapshots).

Why this exists: DeepSpeed builds the optimizer of an `optimizer` block as `Class(params, **block["params"])`
(runtime/engine.py `_configure_basic_optimizer`) and the scheduler as `Class(optimizer, **params)`
(`_scheduler_from_config`), so a misspelled type (`AdamWW`) or parameter (`betaz`) stops the run when the engine
starts. The names come from the releases' source, read as AST (nothing imported): `DEEPSPEED_OPTIMIZERS` in
runtime/config.py, the `__init__` signatures of the classes each name builds, and the classes of
runtime/lr_schedules.py. Any other `type` goes to `getattr(torch.optim, type)` /
`torch.optim.lr_scheduler`: those come from the installed torch (`inspect`), which the script records with its
version.

Usage::

    python scripts/sync_ds_optimizers.py                      # the installed deepspeed and torch
    python scripts/sync_ds_optimizers.py --source 0.14.5=downloads/deepspeed-0.14.5.tar.gz ...  # older releases, merged
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import inspect
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from audit_startup_checks import release_files

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "cfgopt" / "knowledge" / "schemas" / "ds-optimizers.json"

# DeepSpeed optimizer name -> the classes `_configure_basic_optimizer` may build for it ("torch:X": torch.optim.X,
# with `torch_adam: true` or without ZeRO offload), and the parameters it pops before the call.
BUILDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "adam": (
        ("ops/adam/fused_adam.py:FusedAdam", "ops/adam/cpu_adam.py:DeepSpeedCPUAdam", "torch:Adam", "torch:AdamW"),
        ("adam_w_mode", "torch_adam", "fp32_optimizer_states"),
    ),
    "adagrad": (("ops/adagrad/cpu_adagrad.py:DeepSpeedCPUAdagrad", "torch:Adagrad"), ()),
    "lamb": (("ops/lamb/fused_lamb.py:FusedLamb",), ()),
    "lion": (("ops/lion/fused_lion.py:FusedLion", "ops/lion/cpu_lion.py:DeepSpeedCPULion"), ()),
    "onebitadam": (("runtime/fp16/onebit/adam.py:OnebitAdam",), ()),
    "zerooneadam": (("runtime/fp16/onebit/zoadam.py:ZeroOneAdam",), ()),
    "onebitlamb": (("runtime/fp16/onebit/lamb.py:OnebitLamb",), ()),
}
BUILDS["adamw"] = BUILDS["adam"]
FILES = (
    "runtime/config.py",
    "runtime/lr_schedules.py",
    *tuple(
        sorted(
            {spec.split(":")[0] for classes, _ in BUILDS.values() for spec in classes if not spec.startswith("torch")}
        )
    ),
)


def _init_params(tree: ast.Module, name: str) -> list[str] | None:
    """Keyword names of `name.__init__` after self and the first positional (params / optimizer); None: **kwargs."""
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                    if item.args.kwarg is not None:
                        return None
                    names = [arg.arg for arg in item.args.posonlyargs + item.args.args + item.args.kwonlyargs]
                    return sorted(names[2:] + [arg.arg for arg in item.args.kwonlyargs if arg.arg not in names])
            return None  # no __init__ of its own: inherited, judged as open
    return []  # not in this release


def _optimizer_names(config: ast.Module) -> list[str]:
    constants = {
        target.id: node.value.value
        for node in config.body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    for node in config.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "DEEPSPEED_OPTIMIZERS" for t in node.targets
        ):
            return sorted(constants[e.id] for e in node.value.elts if isinstance(e, ast.Name) and e.id in constants)
    return []


def release_table(location: str) -> dict:
    texts = release_files("deepspeed", location, FILES)
    trees = {path: ast.parse(text) for path, text in texts.items()}
    optimizers: dict[str, list[str] | None] = {}
    for name in _optimizer_names(trees["runtime/config.py"]):
        classes, popped = BUILDS.get(name, ((), ()))
        accepted: set[str] = set(popped)
        open_ended = not classes
        for spec in classes:
            if spec.startswith("torch:"):
                accepted.add(spec)  # resolved against the torch table at lint time
                continue
            path, cls = spec.split(":")
            params = _init_params(trees[path], cls) if path in trees else []
            open_ended |= params is None
            accepted.update(params or ())
        optimizers[name] = None if open_ended else sorted(accepted)
    schedulers = {
        node.name: _init_params(trees["runtime/lr_schedules.py"], node.name)
        for node in trees["runtime/lr_schedules.py"].body
        if isinstance(node, ast.ClassDef) and not node.name.startswith("_")
    }
    return {"optimizers": optimizers, "schedulers": schedulers}


def torch_table() -> dict:
    import torch

    def table(module, base) -> dict[str, list[str] | None]:
        out: dict[str, list[str] | None] = {}
        for name, cls in vars(module).items():
            if inspect.isclass(cls) and issubclass(cls, base) and cls is not base and not name.startswith("_"):
                signature = inspect.signature(cls.__init__)
                kinds = [p.kind for p in signature.parameters.values()]
                names = list(signature.parameters)[2:]
                out[name] = (
                    None
                    if inspect.Parameter.VAR_KEYWORD in kinds
                    else sorted(n for n in names if signature.parameters[n].kind != inspect.Parameter.VAR_POSITIONAL)
                )
        return out

    return {
        "version": torch.__version__.split("+")[0],
        "optimizers": table(torch.optim, torch.optim.Optimizer),
        "schedulers": table(torch.optim.lr_scheduler, torch.optim.lr_scheduler.LRScheduler),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--source", action="append", default=[], metavar="VERSION=PATH")
    args = parser.parse_args(argv)
    snapshot = json.loads(OUT.read_text(encoding="utf-8")) if OUT.exists() else {"releases": {}}
    sources = [tuple(source.split("=", 1)) for source in args.source]
    if not sources:
        from importlib import metadata

        spec = importlib.util.find_spec("deepspeed")
        assert spec is not None and spec.submodule_search_locations, "deepspeed is not installed"
        sources = [(metadata.version("deepspeed"), next(iter(spec.submodule_search_locations)))]
        snapshot["torch"] = torch_table()
    for version, location in sources:
        snapshot["releases"][version] = release_table(location)
        print(f"deepspeed {version}: {len(snapshot['releases'][version]['optimizers'])} optimizer names")
    snapshot["releases"] = dict(sorted(snapshot["releases"].items(), key=lambda kv: [int(p) for p in kv[0].split(".")]))
    OUT.write_text(json.dumps(snapshot, sort_keys=True, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
