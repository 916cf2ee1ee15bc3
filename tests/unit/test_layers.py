"""Layering is enforced: a module may import only its own layer or lower ones (STYLE.md §4)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "splitplan"

# Lower number = lower layer. Longest matching prefix wins.
LAYERS = {
    "splitplan._version": 0,
    "splitplan.errors": 0,
    "splitplan._rng": 0,
    "splitplan._paths": 0,
    "splitplan._io": 0,
    "splitplan._numbers": 0,
    "splitplan.catalog": 1,
    "splitplan.perf": 2,
    "splitplan.workload": 3,
    "splitplan.slo": 3,
    "splitplan.design": 3,
    "splitplan.sim": 4,
    "splitplan.search": 5,
    "splitplan.report": 6,
    "splitplan.api": 7,
    "splitplan.cli": 8,
    "splitplan.__main__": 8,
    "splitplan._entry": 8,  # the console script: signal handling, then the CLI
    "splitplan": 0,
}


def layer_of(module: str) -> int:
    best = max((p for p in LAYERS if module == p or module.startswith(p + ".")), key=len)
    return LAYERS[best]


def module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append(node.module)
        elif isinstance(node, ast.Import):
            out.extend(a.name for a in node.names)
    return [m for m in out if m == "splitplan" or m.startswith("splitplan.")]


MODULES = sorted(p for p in PKG.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PKG)))
def test_no_upward_imports(path: Path) -> None:
    me = module_name(path)
    if me == "splitplan":
        return  # the package root re-exports the public API
    mine = layer_of(me)
    upward = [m for m in imports(path) if layer_of(m) > mine]
    assert not upward, f"{me} (layer {mine}) imports higher layer(s): {upward}"


def test_layer_map_catches_violations() -> None:
    assert layer_of("splitplan.perf.profile") > layer_of("splitplan.catalog.models")
    assert layer_of("splitplan.cli.search") > layer_of("splitplan.api")
    assert layer_of("splitplan.sim.des.engine") < layer_of("splitplan.search.grid")
