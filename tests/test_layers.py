"""The layer rule of docs/architecture.md: kg < ingest, multimodal < service < eval; a module imports only
from its own layer or those below it (at module level or inside functions), and no product modules
import each other in a cycle."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support import REPO

RANK = {"kg": 0, "ingest": 1, "multimodal": 1, "service": 2, "eval": 3}


def _modules() -> dict[str, Path]:
    found = {}
    for top in RANK:
        for path in (REPO / top).rglob("*.py"):
            name = ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
            found[name] = path
    return found


def _imports(path: Path, module: str) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.level:  # relative: resolve against the importing module's package
                package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
                names.append(".".join([*package[: len(package) - node.level + 1], node.module]))
            else:
                names.append(node.module)
                names += [f"{node.module}.{a.name}" for a in node.names]
    return names


def _graph() -> tuple[dict[str, set[str]], list[str]]:
    modules = _modules()
    edges: dict[str, set[str]] = {}
    upward = []
    for module, path in modules.items():
        layer = RANK[module.split(".")[0]]
        for name in _imports(path, module):
            top = name.split(".")[0]
            if top in RANK and RANK[top] > layer:
                upward.append(f"{module} imports {name}")
            if name in modules and name != module:
                edges.setdefault(module, set()).add(name)
    return edges, upward


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in list(edges):
        if v not in index:
            visit(v)
    return found


def test_no_module_imports_from_a_layer_above_it() -> None:
    _, upward = _graph()
    assert upward == []


def test_no_import_cycles_between_product_modules() -> None:
    edges, _ = _graph()
    assert _cycles(edges) == []


def test_the_checker_sees_an_upward_import_inside_a_function(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text("def f():\n    from eval.cli import app\n")
    assert "eval.cli" in _imports(path, "service.m")
