"""Module structure the search relies on: no import cycle, no private name crossing modules, no
string switches on engine/objective (enums), and the strategies as peers of one context."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "splitplan"
# areas whose modules follow the rule (others are checked by their own owners' tests)
OWN = ("search", "api", "report", "sim/analytic.py", "sim/kv_transfer.py", "slo.py", "design.py")


def module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def top_level_imports(path: Path) -> set[str]:
    """splitplan modules imported at module level (not under TYPE_CHECKING, not inside functions)."""
    tree = ast.parse(path.read_text())
    out: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("splitplan"):
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("splitplan"))
    return out


def owned(path: Path) -> bool:
    rel = path.relative_to(PKG).as_posix()
    return any(rel == o or rel.startswith(o + "/") for o in OWN)


def test_no_import_cycle_in_the_package() -> None:
    graph = {module_name(p): top_level_imports(p) for p in PKG.rglob("*.py")}
    state: dict[str, int] = {}

    def visit(m: str, stack: list[str]) -> None:
        state[m] = 1
        for dep in graph.get(m, ()):
            if dep not in graph:
                continue
            if state.get(dep) == 1:
                raise AssertionError("import cycle: " + " → ".join([*stack, m, dep]))
            if dep not in state:
                visit(dep, [*stack, m])
        state[m] = 2

    for m in graph:
        if m not in state:
            visit(m, [])


def test_no_private_name_crosses_a_module() -> None:
    bad = []
    for path in PKG.rglob("*.py"):
        if not owned(path):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("splitplan"):
                bad += [
                    f"{path.relative_to(PKG)}: {node.module}.{a.name}"
                    for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")
                ]
    assert not bad, bad


def test_engine_and_objective_are_enums_not_string_switches() -> None:
    pattern = re.compile(r"\b(engine|objective|method)\s*[!=]=\s*[\"']")
    bad = []
    for path in PKG.rglob("*.py"):
        if owned(path):
            bad += [
                f"{path.relative_to(PKG)}:{i}"
                for i, line in enumerate(path.read_text().splitlines(), 1)
                if pattern.search(line)
            ]
    assert not bad, bad


def test_strategies_are_peers_of_one_context() -> None:
    strategies = {"splitplan.search.cost_grid", "splitplan.search.throughput", "splitplan.search.bayes"}
    for name in strategies:
        path = PKG / "search" / (name.rsplit(".", 1)[1] + ".py")
        deps = top_level_imports(path)
        assert "splitplan.search.context" in deps, name
        assert not deps & (strategies - {name}), f"{name} imports another strategy"
        assert "splitplan.search.run" not in deps, name
    assert not top_level_imports(PKG / "search" / "context.py") & strategies


def test_module_docstrings_give_the_enforced_layer_number() -> None:
    from test_layers import layer_of
    from test_layers import module_name as layered_name

    drift = []
    for path in PKG.rglob("*.py"):
        m = re.match(r'"""Layer (\d+)', path.read_text())
        if m and int(m.group(1)) != layer_of(layered_name(path)):
            drift.append(f"{path.relative_to(PKG)} says {m.group(1)}, is {layer_of(layered_name(path))}")
    assert not drift, drift
