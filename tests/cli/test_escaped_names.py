"""The `\\xNN` spelling of names is one-to-one: a byte that is not UTF-8, a control character and a file literally
named with a backslash never read alike (in the report, the review log, the terminal)."""

from __future__ import annotations

import csv
import os

import pytest
from conftest import stripes
from PIL import Image

from app.cli import main
from app.errors import shown
from app.runs.outputs.report import path_text
from app.runs.review.log import STATES, ReviewLog

BYTE = os.fsdecode(b"caf\xe9.png")  # Python spells the byte \udce9
LITERAL = "caf\\xe9.png"  # eleven characters, a backslash among them


@pytest.mark.parametrize("spell", [path_text, shown])
def test_a_byte_and_its_spelling_in_letters_read_differently(spell):
    assert spell(BYTE) == "caf\\xe9.png"
    assert spell(LITERAL) == "caf\\\\xe9.png"
    assert spell("a\\b.png") == "a\\b.png"  # a backslash that cannot be read as an escape stays one


def test_a_control_character_and_its_spelling_read_differently():
    assert shown("lu\x1bng") == "lu\\x1bng" and shown("lu\\x1bng") == "lu\\\\x1bng"
    assert path_text("a\tb\x1b.png") == "a\\x09b\\x1b.png"  # a CSV cell holds no raw control character


@pytest.mark.parametrize("text", ["", "plain", "a\\", "a\\\\b", "\\\\server\\share", BYTE, LITERAL, "\\" + BYTE,
                                  "x\x1b\\x1b\\\\x1b", os.fsdecode(b"\xff\\xff"), "\ud800lone", "\\u0041"])
def test_spelling_is_one_to_one(text):
    """Read back by the rule it is written with: `\\\\` is a backslash, `\\xNN` / `\\uNNNN` an escape, any other
    backslash itself."""
    from app.errors import spelt

    assert _read(spelt(text, controls=True)) == text


def _read(spelling: str) -> str:
    out, i = [], 0
    while i < len(spelling):
        rest = spelling[i:]
        if rest.startswith("\\\\"):
            out.append("\\")
            i += 2
        elif rest[:1] == "\\" and len(rest) >= 4 and rest[1] == "x" and _hex(rest[2:4]):
            code = int(rest[2:4], 16)
            out.append(chr(code + 0xDC00) if code >= 0x80 else chr(code))
            i += 4
        elif rest[:1] == "\\" and len(rest) >= 6 and rest[1] == "u" and _hex(rest[2:6]):
            out.append(chr(int(rest[2:6], 16)))
            i += 6
        else:
            out.append(rest[0])
            i += 1
    return "".join(out)


def _hex(text: str) -> bool:
    return all(c in "0123456789abcdef" for c in text)


def test_two_such_files_get_their_own_report_rows_and_both_resume(models, tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    for name in (os.fsencode(BYTE), os.fsencode(LITERAL)):
        Image.fromarray(stripes()).save(os.fsencode(folder) + b"/" + name, format="PNG")
    model, out = models("rgb_classes"), tmp_path / "out"
    assert main(["run", str(model), str(folder), "--out", str(out)]) == 0
    with open(out / "seglens_report.csv", newline="", encoding="utf-8") as handle:
        paths = sorted(row["path"] for row in csv.DictReader(handle))
    assert paths == [f"{folder}/caf\\\\xe9.png", f"{folder}/caf\\xe9.png"]


def test_two_such_files_keep_their_own_reviews(tmp_path):
    log = ReviewLog.open(tmp_path, "a" * 64)
    log.set(BYTE, STATES[1])
    log.set(LITERAL, STATES[2])
    again = ReviewLog.open(tmp_path, "a" * 64)
    assert (again.get(BYTE).state, again.get(LITERAL).state) == (STATES[1], STATES[2])
