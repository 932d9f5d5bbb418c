"""docs/architecture.md matches the tree: every `app.…` module and `app/…` path it names exists, and the
import-linter contracts its table lists are exactly pyproject's. A rename or a move that forgets the architecture
page fails here, not a newcomer. (The per-file index, docs/modules.md, is generated: tests/house/test_docs.py.)"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ARCHITECTURE = REPO / "docs" / "architecture.md"
DOTTED = re.compile(r"\b(app(?:\.(?!py\b)\w+)+)")  # app.runs.folder.run, not app.py
PATH = re.compile(r"(?<![\w./])(app/[\w./]*\w/?)")  # app/runs/folder/run.py, app/guard/
CONTRACT_ROW = re.compile(r"^\| `([\w-]+)` \|", re.MULTILINE)  # a row of the contracts table


def architecture() -> str:
    return ARCHITECTURE.read_text(encoding="utf-8")


def test_every_app_module_named_exists():
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


def test_every_app_path_named_exists():
    named = set(PATH.findall(architecture()))
    assert "app/runs/folder/run.py" in named  # the pattern finds what the page names
    assert sorted(path for path in named if not (REPO / path).exists()) == []


def test_the_contracts_it_lists_are_pyprojects():
    # each contract's id line follows its [[tool.importlinter.contracts]] header (tomllib is Python 3.11's)
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    ids = set(re.findall(r'^\[\[tool\.importlinter\.contracts\]\]\nid = "([\w-]+)"', pyproject, re.MULTILINE))
    assert ids
    page = architecture()
    table = page[page.index("| contract |"):]
    table = table[:table.index("\n\n")]
    assert set(CONTRACT_ROW.findall(table)) == ids


def test_a_module_is_one_concept_in_at_most_600_lines_and_the_window_in_250():
    """Size by concept, not by count: a module is one concept, in at most 600 lines. One that outgrows it holds two
    concepts, to be cut where they part; a cut made only to meet the number (an `_items`, `_input` or `_text`
    module whose functions take their parent object) is a cut in the wrong place. The window
    (app/ui/main_window.py) is layout and wiring in at most 250 lines; functions stay around 10 lines, most under
    40. The architecture page states both numbers."""
    sizes = {path.relative_to(REPO).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
             for path in (REPO / "app").rglob("*.py")}
    assert {path: n for path, n in sizes.items() if n > 600} == {}
    assert sizes["app/ui/main_window.py"] <= 250
    section = architecture()
    assert "600 lines" in section and "250 lines" in section
