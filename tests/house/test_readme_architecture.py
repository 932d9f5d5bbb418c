"""The README's architecture section matches the tree (issue 25): every module and folder its map names exists
where the map puts it, every `app.…` module it names in prose is there, its import-linter contracts are
pyproject's, and its size rules hold. A rename or a move that forgets the README fails here, not a newcomer."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
ENTRY = re.compile(r"^( *)([\w.]+(?:/[\w.]+)*/?)")  # a map line's first name: `  io/`, `    images.py`
MODULE = re.compile(r"(?<![\w./])((?:\w+/)*\w+\.py)\b")  # x.py, tests/x.py
DOTTED = re.compile(r"\b(app(?:\.(?!py\b)\w+)+)")  # app.runs.folder.run, not app.py


def architecture() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index("\n## Architecture\n")
    return text[start:text.index("\n## ", start + 1)]


def module_map() -> list[str]:
    section = architecture()
    start = section.index("```\napp/\n") + len("```\n")
    return section[start:section.index("```", start)].splitlines()


def named_paths() -> list[tuple[int, str]]:
    """(line of the map, path from the repository root) of every module and folder the map names: a line's first
    name (a module or a folder) sits in the folder its indentation says; the modules its description names are
    that entry's siblings (`spec.py   ModelSpec …; spec_builder.py load_spec …`)."""
    folders: list[tuple[int, str]] = []  # (indent, path) of the folders open above this line
    found: list[tuple[int, str]] = []
    for number, line in enumerate(module_map(), 1):
        match = ENTRY.match(line)
        names = MODULE.findall(line)
        if match and len(match.group(1)) <= 20:  # a wrapped description starts further right, at column 23
            indent, first = len(match.group(1)), match.group(2)
            while folders and folders[-1][0] >= indent:
                folders.pop()
            parent = folders[-1][1] if folders else ""
            if first.endswith("/"):
                found.append((number, parent + first))
                folders.append((indent, parent + first))
                parent += first  # a folder's description names modules inside it
        else:
            parent = folders[-1][1] if folders else ""
        found += [(number, name if "/" in name else parent + name) for name in names]  # tests/x.py: from the root
    return found


def test_every_module_and_folder_the_map_names_exists():
    missing = [f"line {number}: {path}" for number, path in named_paths() if not (REPO / path).exists()]
    assert missing == []


def test_every_app_module_named_in_the_prose_exists():
    missing = []
    for dotted in set(DOTTED.findall(architecture())):
        parts = dotted.split(".")
        # the longest prefix that is a module; what follows it must be a name that module defines
        for cut in range(len(parts), 1, -1):
            base = REPO.joinpath(*parts[:cut])
            module = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
            if module.is_file():
                rest = parts[cut:]
                defined = not rest or re.search(rf"^\s*(?:def|class)\s+{rest[0]}\b|^{rest[0]}\s*[:=]",
                                                module.read_text(encoding="utf-8"), re.MULTILINE)
                if not defined:
                    missing.append(dotted)
                break
        else:
            missing.append(dotted)
    assert sorted(missing) == []


def test_the_contracts_it_names_are_pyprojects():
    # each contract's id line follows its [[tool.importlinter.contracts]] header (tomllib is Python 3.11's)
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    ids = set(re.findall(r'^\[\[tool\.importlinter\.contracts\]\]\nid = "([\w-]+)"', pyproject, re.MULTILINE))
    words = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight"}
    section = architecture()
    assert f"the {words[len(ids)]} contracts" in section
    assert {name for name in re.findall(r"`([\w-]+)`", section) if name in ids or "-" in name} >= ids


def test_no_module_is_over_400_lines_and_the_window_over_250():
    sizes = {path.relative_to(REPO).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
             for path in (REPO / "app").rglob("*.py")}
    assert {path: n for path, n in sizes.items() if n > 400} == {}
    assert sizes["app/ui/main_window.py"] <= 250
    section = architecture()
    assert "over 400 lines" in section and "250 lines" in section
