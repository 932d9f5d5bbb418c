"""app.guard.yaml_load resolves scalars by the YAML 1.2 core schema and refuses the YAML 1.1 tags that build
something other than text, numbers, true/false, null, lists and maps (issue 36, audit finding 7).

PyYAML's YAML 1.1 base-60 integers (`1:1:1:…`) cost time quadratic in their parts: a document under the 1 MiB cap
held the calling thread for ~40 s, a sidecar for ~10 s before its validator refused it. `!!omap`/`!!pairs` are lists
of pairs that keep a duplicate key the loader promises to refuse."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from app.guard.yaml_load import MAX_PLAIN_SCALAR, MAX_YAML_BYTES, YAMLRefused, load_yaml

_HANG_GUARD_S = 5  # generous for a loaded CI machine: the old loader took 40 s on the first input


def _refused(text: str) -> str:
    started = time.monotonic()
    with pytest.raises(YAMLRefused) as caught:
        load_yaml(text, source="station.yaml", what="station file")
    assert time.monotonic() - started < _HANG_GUARD_S
    message = str(caught.value)
    assert message.startswith("station.yaml: ") and "\n" not in message and len(message) < 300, message
    return message


def test_a_base_60_integer_under_the_cap_is_refused_at_once() -> None:
    doc = "k: 1" + ":1" * ((MAX_YAML_BYTES - 10) // 2) + "\n"  # the audit's y2: 1 MiB, 40 s before
    assert _refused(doc) == (f"station.yaml: a plain value longer than {MAX_PLAIN_SCALAR} characters is not "
                             "allowed in a station file (line 1)")


def test_a_short_base_60_value_is_text_not_a_number() -> None:
    assert load_yaml("a: 1:30\nb: 190:20:30\n", source="x") == {"a": "1:30", "b": "190:20:30"}


def test_a_sidecar_with_a_base_60_threshold_is_refused_fast(tmp_path: Path) -> None:
    from app.errors import SidecarError
    from app.inference.model.sidecar import load_sidecar

    for parts in (100_000, 250_000):  # the audit's y3: 1.6 s and 9.6 s before
        path = tmp_path / f"s{parts}.yaml"
        path.write_text("threshold: 1" + ":1" * parts + "\n")
        started = time.monotonic()
        with pytest.raises(SidecarError, match=r"\.yaml: a plain value longer than 4096 characters is not allowed "
                                               r"in a sidecar \(line 1\)$"):
            load_sidecar(path)
        assert time.monotonic() - started < _HANG_GUARD_S


@pytest.mark.parametrize(("text", "tag", "line"), [
    ("!!omap [threshold: 0.9, threshold: 0.1]\n", "!!omap", 1),
    ("classes: !!pairs [liver: 1, liver: 2]\n", "!!pairs", 1),
    ("a: 1\nb: !!set {x, y}\n", "!!set", 2),
    ("a: !!binary AAAA\n", "!!binary", 1),
    ("a: 1\n\nc: !!timestamp 2001-01-01\n", "!!timestamp", 3),
    ("a: !!python/name:os.system\n", "!!python/name:os.system", 1),
    ("a: !mine 3\n", "!mine", 1),
])
def test_tags_that_build_anything_else_are_refused_at_their_line(text: str, tag: str, line: int) -> None:
    assert _refused(text) == f"station.yaml: the YAML tag {tag} is not allowed in a station file (line {line})"


def test_the_core_tags_may_be_written() -> None:
    text = "a: !!str 1\nb: !!int '7'\nc: !!float 2\nd: !!bool true\ne: !!null ''\nf: !!seq [1]\ng: !!map {h: 1}\n"
    assert load_yaml(text, source="x") == {"a": "1", "b": 7, "c": 2.0, "d": True, "e": None, "f": [1],
                                           "g": {"h": 1}}


@pytest.mark.parametrize(("text", "problem"), [("a: !!int 1:30\n", "not an integer: '1:30'"),
                                               ("a: !!int 1_000\n", "not an integer: '1_000'"),
                                               ("a: !!float 1_0.5\n", "not a number: '1_0.5'"),
                                               ("a: !!int ' 7'\n", "not an integer: ' 7'")])
def test_a_tagged_value_outside_the_core_forms_is_refused(text: str, problem: str) -> None:
    assert _refused(text) == f"station.yaml: invalid YAML at line 1: {problem}"


def test_core_schema_values() -> None:
    text = ("i: 42\nn: -7\np: +3\no: 0o17\nx: 0x1F\nf: 0.5\ne: 1e-3\nE: 2.5E+2\nd: .5\ninf: .inf\nninf: -.Inf\n"
            "t: true\nF: False\ny: yes\nN: no\no1: on\no2: off\nz: ~\nnul: null\nempty:\n")
    value = load_yaml(text, source="x")
    nan = load_yaml("n: .nan\n", source="x")["n"]
    assert nan != nan
    assert value == {"i": 42, "n": -7, "p": 3, "o": 15, "x": 31, "f": 0.5, "e": 0.001, "E": 250.0, "d": 0.5,
                     "inf": float("inf"), "ninf": float("-inf"), "t": True, "F": False, "y": True, "N": False,
                     "o1": True, "o2": False, "z": None, "nul": None, "empty": None}


@pytest.mark.parametrize(("text", "value"), [("a: 0b101\n", "0b101"), ("a: 1_000\n", "1_000"),
                                             ("a: 2001-01-01\n", "2001-01-01"), ("a: 0x_1F\n", "0x_1F"),
                                             ("a: 1:1:1\n", "1:1:1")])
def test_yaml_1_1_only_forms_are_text(text: str, value: str) -> None:
    assert load_yaml(text, source="x") == {"a": value}


def test_a_long_quoted_value_is_text_and_a_long_plain_one_is_refused_at_its_line() -> None:
    assert load_yaml(f"a: '{'x' * 10_000}'\n", source="x") == {"a": "x" * 10_000}
    assert _refused(f"a: 1\nb: {'x' * (MAX_PLAIN_SCALAR + 1)}\n").endswith("(line 2)")
    assert load_yaml(f"a: {'x' * MAX_PLAIN_SCALAR}\n", source="x") == {"a": "x" * MAX_PLAIN_SCALAR}


def test_a_long_hex_integer_is_refused_fast() -> None:
    _refused("a: 0x" + "f" * (MAX_YAML_BYTES - 20) + "\n")
