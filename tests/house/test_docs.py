"""The docs hold together: the README stays a front page that links every page of docs/, every relative link and
anchor in the README and docs/ leads somewhere, no page cites an issue number, and the generated pages
(docs/modules.md, docs/cli-reference.md) are what their tools make from the tree now."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
PAGES = sorted((REPO / "docs").glob("*.md"))
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} +(.+?) *$", re.MULTILINE)
ISSUE = re.compile(r"\bissue\s*#?\d+", re.IGNORECASE)


def prose(path: Path) -> str:
    """The page without its code blocks and inline code (a `[x](y)` there is not a link)."""
    return CODE.sub("", FENCE.sub("", path.read_text(encoding="utf-8")))


def anchors(path: Path) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation dropped, spaces as '-', repeats numbered."""
    found: set[str] = set()
    for heading in HEADING.findall(FENCE.sub("", path.read_text(encoding="utf-8"))):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        candidate, n = slug, 0
        while candidate in found:
            n += 1
            candidate = f"{slug}-{n}"
        found.add(candidate)
    return found


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in LINK.findall(prose(page)):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        resolved = (page.parent / file).resolve() if file else page
        if not resolved.exists():
            broken.append(f"{page.name}: {target}")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{page.name}: {target} (no such heading)")
    return broken


def test_the_readme_is_a_front_page_that_links_every_page_of_docs():
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 250
    linked = {(REPO / target.partition("#")[0]).resolve() for target in LINK.findall(prose(README))}
    assert PAGES and [page.name for page in PAGES if page.resolve() not in linked] == []


@pytest.mark.parametrize("page", [README, REPO / "CHANGELOG.md", *PAGES], ids=lambda page: page.name)
def test_every_relative_link_and_anchor_resolves(page):
    assert broken_links(page) == []


def test_a_broken_link_or_anchor_is_found(tmp_path):
    (tmp_path / "there.md").write_text("# A heading: `with code` → arrows\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text("[ok](there.md#a-heading-with-code--arrows) [gone](missing.md) [bad](there.md#nope)\n"
                    "`[code](not-a-link.md)`\n", encoding="utf-8")
    assert broken_links(page) == ["page.md: missing.md", "page.md: there.md#nope (no such heading)"]


@pytest.mark.parametrize("page", [README, REPO / "CHANGELOG.md", *PAGES], ids=lambda page: page.name)
def test_no_page_cites_an_issue_number(page):
    assert ISSUE.findall(page.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("tool", ["module_index.py", "cli_reference.py"])
def test_the_generated_pages_are_fresh(tool):
    done = subprocess.run([sys.executable, str(REPO / "tools" / tool), "--check"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stderr) == (0, "")


def _tool(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, REPO / "tools" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["module_index", "cli_reference"])
def test_a_stale_page_fails_the_check_in_one_line(name, tmp_path, monkeypatch, capsys):
    tool = _tool(name)
    page = tmp_path / "docs" / "page.md"
    page.parent.mkdir()
    monkeypatch.setattr(tool, "REPO", tmp_path)
    monkeypatch.setattr(tool, "PAGE", page)
    monkeypatch.setattr(tool, "render", lambda: "# fresh\n")
    page.write_text("# stale\n", encoding="utf-8")
    assert tool.main(["--check"]) == 1
    assert capsys.readouterr().err.splitlines() == [f"{Path('docs', 'page.md')} is stale: run "
                                                    f"`uv run python tools/{name}.py`"]
    assert tool.main([]) == 0 and tool.main(["--check"]) == 0
    assert page.read_text(encoding="utf-8") == "# fresh\n"
