"""app.guard.names: `component` makes any name one safe, distinct file-name component; `join_under` proves a
join stays under its root with every symlink resolved (issue 36)."""

from __future__ import annotations

import itertools
import os
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.guard.names import MAX_COMPONENT_BYTES, PathEscape, component, inside, join_under

_TRICKY = [".", "%", "/", "\\", " ", "a", "C", "O", "N", "\x00", "~", "é", "\u202e", ":", "\n"]
_RESERVED = ["CON", "con", "Con.txt", "PRN", "AUX", "NUL", "nul.tar.gz", "COM1", "com9", "LPT0", "lpt3.log",
             "CON .txt", "nul  .png", "CONIN$", "conout$.log", "COM¹", "lpt³.txt"]


def _safe(text: str, max_bytes: int = MAX_COMPONENT_BYTES) -> None:
    """Every property a component must have."""
    assert text and text not in (".", "..")
    assert not any(ch in text for ch in '/\\\x00:*?"<>|')
    assert not any(unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp") for ch in text)
    assert text[0] not in ". " and text[-1] not in ". "
    assert text.split(".")[0].rstrip(" ").upper() not in {
        "CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$", *(f"{d}{n}" for d in ("COM", "LPT") for n in "0123456789¹²³")}
    assert len(text.encode("utf-8")) <= max_bytes  # and whole characters: encode() would fail on a lone half


def test_injective_over_every_short_name_of_tricky_characters() -> None:
    """All 66,000 names of up to four of the characters that need escaping map to distinct components."""
    names = ["".join(p) for n in range(5) for p in itertools.product(_TRICKY, repeat=n)]
    components = [component(name) for name in names]
    assert len(set(components)) == len(names)
    for text in components:
        _safe(text)


@settings(max_examples=600, deadline=None)
@given(st.text(max_size=300), st.text(max_size=300))
def test_injective_and_safe_for_any_text(a: str, b: str) -> None:
    ca, cb = component(a), component(b)
    _safe(ca)
    _safe(cb)
    assert (ca == cb) == (a == b)


@settings(max_examples=300, deadline=None)
@given(st.text(min_size=1, max_size=400), st.integers(min_value=24, max_value=255))
def test_cut_on_a_character_boundary_within_the_limit(name: str, max_bytes: int) -> None:
    text = component(name, max_bytes=max_bytes)
    _safe(text, max_bytes)
    if "~" in text:  # cut: never half an escape before the `~` and its hash
        head = text.rsplit("~", 1)[0]
        assert not head.endswith("%") and not (len(head) > 1 and head[-2] == "%")


def test_two_long_names_alike_up_to_their_end_stay_apart() -> None:
    head = "1.2.840.10008." + "9" * 400
    a, b = component(head + "1"), component(head + "2")
    assert a != b and a[:150] == b[:150] and "~" in a


def test_a_cut_name_never_meets_an_uncut_one() -> None:
    long = "x" * 500
    cut = component(long)
    assert component(cut) != cut  # the `~` of a cut name is escaped in any name given as is


@pytest.mark.parametrize("name", _RESERVED)
def test_windows_device_names_are_escaped(name: str) -> None:
    text = component(name)
    _safe(text)
    assert text != name


@pytest.mark.parametrize("name", ["CONSOLE", "COM10", "conference.txt", "LPT", "nul_mask"])
def test_names_that_only_begin_like_a_device_are_kept(name: str) -> None:
    assert component(name) == name


@pytest.mark.parametrize("name", [*(chr(n) for n in range(32)), "\x7f", "\x85", "\u2028", "\u200b", "\ufeff"])
def test_control_and_format_characters_never_pass(name: str) -> None:
    text = component(f"a{name}b")
    _safe(text)
    assert name not in text


@pytest.mark.parametrize("name", ["..", ".", "", "../../etc", "/etc/passwd", "a/b", "C:\\x", " x", "x ", "x."])
def test_traversal_names_become_one_component(name: str, tmp_path: Path) -> None:
    text = component(name)
    _safe(text)
    assert join_under(tmp_path, text).parent == tmp_path


def test_a_lone_surrogate_from_a_file_name_is_escaped() -> None:
    name = b"caf\xe9".decode("utf-8", "surrogateescape")
    text = component(name)
    _safe(text)
    assert text == "caf%ED%B3%A9"


# --- join_under ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("part", ["..", ".", "", "a/b", "/abs", "a\x00b",
                                  *(["a\\b"] if os.sep == "\\" or os.altsep else [])])
def test_join_under_refuses_what_is_not_one_component(part: str, tmp_path: Path) -> None:
    with pytest.raises(PathEscape):
        join_under(tmp_path, part)


@pytest.mark.skipif(os.sep == "\\", reason="a backslash separates folders on Windows")
def test_a_backslash_is_a_letter_of_a_posix_name(tmp_path: Path) -> None:
    # SegLens spells an undecodable byte `\xe9` in an output's name (caf\xe9.png_mask.png): one component here
    assert join_under(tmp_path, "caf\\xe9.png_mask.png") == tmp_path / "caf\\xe9.png_mask.png"


def test_join_under_refuses_a_symlink_planted_under_a_name(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "elsewhere").mkdir()
    (root / "series").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(PathEscape, match="leads outside"):
        join_under(root, "series")
    with pytest.raises(PathEscape):
        join_under(root, "series", "x.dcm")


def test_join_under_accepts_a_symlink_that_stays_inside(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "real").mkdir(parents=True)
    (root / "alias").symlink_to(root / "real")
    assert join_under(root, "alias", "x") == root / "alias" / "x"


def test_join_under_a_root_reached_through_a_symlink(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert join_under(tmp_path / "link", "a", "b") == tmp_path / "link" / "a" / "b"


def test_join_under_names_not_yet_there(tmp_path: Path) -> None:
    assert join_under(tmp_path, "new", "deeper") == tmp_path / "new" / "deeper"


def test_inside_with_a_symlink_loop(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    inside(tmp_path, tmp_path / "a")  # realpath leaves a loop as it is: still under the root


def test_a_component_is_always_joinable(tmp_path: Path) -> None:
    for name in ["..", "con", "%", "~", "a" * 1000, "\x00", os.sep * 3]:
        assert join_under(tmp_path, component(name)).parent == tmp_path
