"""The words about the code name code that is there: every `app.…` name and every `app/…` or `tests/…` path in a
docstring or comment of app/, in the README, docs/ and pyproject.toml resolves (a module, or a name defined at the
top of one, or a member of such a class), and no docstring or comment of app/ cites an issue number."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NAME = re.compile(r"\bapp(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
PATH = re.compile(r"(?<![\w/.-])(?:app|tests)/[\w/.-]*\w")
ISSUE = re.compile(r"\bissues?\s*#?\d+", re.IGNORECASE)
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "pyproject.toml"]
NOT_MODULES = {"app.py", "app.libraries"}  # a file's name; the logger the libraries' records go to (app.logs)


def modules(root: Path = REPO) -> dict[str, Path]:
    """Dotted name → file, for every module under app/."""
    found = {}
    for path in (root / "app").rglob("*.py"):
        parts = list(path.relative_to(root).with_suffix("").parts)
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


@cache
def defined(path: Path) -> dict[str, frozenset[str]]:
    """A module's top-level names (assigned, defined, imported; under `if`/`try` too) → a class's member names."""
    names: dict[str, frozenset[str]] = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ClassDef):
            names[node.name] = frozenset(_assigned(node.body))
        elif isinstance(node, (ast.Module, ast.If, ast.Try)):
            names.update((name, names.get(name, frozenset())) for name in _assigned(node.body))
    return names


def _assigned(body: list[ast.stmt]) -> set[str]:
    names = set()
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    return names


def resolves(name: str, known: dict[str, Path]) -> bool:
    """`app.a.b` is a module, or the longest module prefix defines the next part (and a class, its member)."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        module = ".".join(parts[:end])
        if module in known:
            rest, names = parts[end:], defined(known[module])
            if not rest:
                return True
            if rest[0] not in names:
                return False
            return len(rest) == 1 or not names[rest[0]] or rest[1] in names[rest[0]]
    return False


def texts(path: Path) -> list[tuple[int, str]]:
    """A module's docstrings and comments, each with its first line."""
    source = path.read_text(encoding="utf-8")
    found = [(node.body[0].lineno, ast.get_docstring(node, clean=False) or "")
             for node in ast.walk(ast.parse(source))
             if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))]
    found += [(token.start[0], token.string) for token in tokenize.generate_tokens(io.StringIO(source).readline)
              if token.type == tokenize.COMMENT]
    return found


def unresolved(where: str, line: int, text: str, known: dict[str, Path], root: Path = REPO) -> list[str]:
    names = [name.rstrip(".") for name in NAME.findall(text)]
    bad = [name for name in names if name not in NOT_MODULES and not resolves(name, known)]
    bad += [path for path in PATH.findall(text) if not (root / path).exists() and not any(c in path for c in "*")]
    return [f"{where}:{line} {name}" for name in bad]


def test_every_name_and_path_in_the_code_s_own_words_resolves():
    known = modules()
    bad = [found for path in known.values() for line, text in texts(path)
           for found in unresolved(str(path.relative_to(REPO)), line, text, known)]
    assert bad == []


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_name_and_path_in_the_docs_resolves(page):
    known = modules()
    bad = [found for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
           for found in unresolved(page.name, number, line, known)]
    assert bad == []


def test_no_docstring_or_comment_of_app_nor_pyproject_cites_an_issue_number():
    cited = [f"{path.relative_to(REPO)}:{line}" for path in modules().values() for line, text in texts(path)
             if ISSUE.search(text)]
    cited += [f"pyproject.toml:{number}" for number, line in
              enumerate((REPO / "pyproject.toml").read_text(encoding="utf-8").splitlines(), 1) if ISSUE.search(line)]
    assert cited == []


def test_a_stale_name_or_path_is_found(tmp_path):
    (tmp_path / "app" / "room").mkdir(parents=True)
    (tmp_path / "app" / "room" / "__init__.py").write_text("")
    (tmp_path / "app" / "room" / "thing.py").write_text("class Thing:\n    size = 1\n\n    def run(self): ...\n"
                                                       "def helper(): ...\n")
    known = modules(tmp_path)
    good = "app.room, app.room.thing.Thing.run, app.room.thing.helper, app/room/thing.py."
    assert unresolved("x", 1, good, known, tmp_path) == []
    bad = "app.room.gone, app.room.thing.Thing.walk, app.room.thing.nothing, app/room/gone.py, tests/gone/"
    assert unresolved("x", 1, bad, known, tmp_path) == [
        "x:1 app.room.gone", "x:1 app.room.thing.Thing.walk", "x:1 app.room.thing.nothing", "x:1 app/room/gone.py",
        "x:1 tests/gone"]
