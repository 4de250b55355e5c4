"""The package's import graph: no circle, and the arrows between ``train``'s folders go
one way — the optimizers know nothing of the wrappers around them.

The graph is read from the source (``ast``): an arrow from each module to every
``funcgrad`` module it imports, at its top level or inside a function (an import put off
to run time hides no arrow), ``from funcgrad.x import y`` counting
as an import of ``funcgrad.x.y`` where that is a module and of ``funcgrad.x`` otherwise.
"""

from __future__ import annotations

import ast
from pathlib import Path

import funcgrad

ROOT = Path(funcgrad.__file__).parent


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module(p): p for p in ROOT.rglob("*.py")}


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("funcgrad")}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("funcgrad"):
            for alias in node.names:
                name = f"{node.module}.{alias.name}"
                found.add(name if name in MODULES else str(node.module))
    return {m for m in found if m in MODULES}


GRAPH = {m: _imports(p) - {m} for m, p in MODULES.items()}


def _circles() -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan's)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(component)

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    return found


def test_no_module_imports_itself_back() -> None:
    circles = [sorted(c) for c in _circles()]
    assert not circles, f"import circles: {circles}"


def test_the_optimizers_import_nothing_of_the_wrappers_or_the_checkpoints() -> None:
    arrows = [
        f"{m} -> {w}"
        for m, targets in GRAPH.items()
        if m.startswith("funcgrad.train.optimizers")
        for w in targets
        if w.startswith(("funcgrad.train.wrappers", "funcgrad.train.checkpoints"))
    ]
    assert not arrows, arrows


def test_the_graph_is_read() -> None:
    assert "funcgrad.train.optimizers.base" in GRAPH["funcgrad.train.optimizers.tf1"]
    assert "funcgrad.train.optimizers.tf1" in GRAPH["funcgrad.train.optimizers.contrib.adamax"]
    assert "funcgrad.train.wrappers._wrapper" in GRAPH["funcgrad.train.wrappers.loss_scale"]
