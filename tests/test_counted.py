"""Counts in what SegLens says agree in number: `1 file`, `2 files`, `1 series`; never `file(s)`."""

from __future__ import annotations

import re
import tokenize

from conftest import REPO

from app.spelling import counted


def test_counted_agrees_in_number():
    assert [counted(n, "file") for n in (0, 1, 2)] == ["0 files", "1 file", "2 files"]
    assert [counted(n, "series", "series") for n in (1, 3)] == ["1 series", "3 series"]
    assert [counted(n, "box", "boxes") for n in (1, 2)] == ["1 box", "2 boxes"]


# `image(s)`, `box(es)` in a string: a count that does not say whether it is one (`http(s)` is no count)
HEDGED = re.compile(r"\b(?!https?\()[A-Za-z]+\((?:s|es)\)")


def _strings(path):
    """The string literals of a module (f-strings whole), with their line numbers."""
    with path.open("rb") as source:
        return [(token.start[0], token.string) for token in tokenize.tokenize(source.readline)
                if token.type == tokenize.STRING]


def test_no_text_hedges_its_number():
    hedged = [f"{path.relative_to(REPO)}:{number}: {text}"
              for path in sorted((REPO / "app").rglob("*.py")) for number, text in _strings(path)
              if HEDGED.search(text)]
    assert hedged == []
