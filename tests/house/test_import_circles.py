"""No import circle between the modules of app.io, app.runs or app.cli (issue 25): every import is counted, those
inside functions and those for the type checker only too, so a circle cannot hide in either. In app.inference the
imports made at run time (the type checker's left out: spec's records and the stages that take them still name
each other's types)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

APP = Path(__file__).resolve().parents[2] / "app"


def _module(path: Path) -> str:
    parts = path.relative_to(APP.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, modules: set[str], *, typing: bool) -> set[str]:
    package = _module(path) if path.name == "__init__.py" else _module(path).rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = set() if typing else {id(node) for block in tree.body if isinstance(block, ast.If)
                                    and "TYPE_CHECKING" in ast.unparse(block.test) for node in ast.walk(block)}
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package, up level - 1
                parent = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*parent, *([node.module] if node.module else [])])
            found |= {base, *(f"{base}.{alias.name}" for alias in node.names)}
    return found & modules


def _circles(package: str, *, typing: bool = True) -> list[list[str]]:
    """The strongly connected groups of more than one module inside `package` (Tarjan's algorithm); `typing`:
    the imports for the type checker only counted too."""
    files = {_module(p): p for p in (APP.parent / package.replace(".", "/")).rglob("*.py")}
    graph = {m: _imports(p, set(files), typing=typing) - {m} for m, p in files.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while not group or group[-1] != v:
                group.append(stack.pop())
            if len(group) > 1:
                circles.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return circles


@pytest.mark.parametrize("package", ["app.io", "app.runs", "app.cli"])
def test_no_import_circle_inside_the_package(package):
    assert _circles(package) == []


def test_no_import_circle_at_run_time_inside_inference():
    assert _circles("app.inference", typing=False) == []


def test_a_circle_is_found_where_there_is_one(tmp_path, monkeypatch):
    folder = tmp_path / "app" / "demo"
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text("")
    (folder / "a.py").write_text("def f():\n    from app.demo.b import g\n")  # inside a function
    (folder / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from app.demo import a\n")
    (folder / "c.py").write_text("from app.demo import a\n")
    monkeypatch.setattr(__import__(__name__), "APP", tmp_path / "app")
    assert _circles("app.demo") == [["app.demo.a", "app.demo.b"]]
    assert _circles("app.demo", typing=False) == []
