"""app.guard.yaml_load refuses a control character in one line: PyYAML's reader raises as the loader is made,
which escaped the loader's own handling (a traceback from every YAML reader: sidecars, prompt sidecars, stations)."""

from __future__ import annotations

import pytest

from app.guard.yaml_load import YAMLRefused, load_yaml


@pytest.mark.parametrize("data", [b"\x01", b"a: 1\nb: \x07\n", "name: \x1b[31m\n"])
def test_a_control_character_is_one_refused_line(data: bytes | str) -> None:
    with pytest.raises(YAMLRefused) as caught:
        load_yaml(data, source="x.yaml")
    assert str(caught.value).startswith("x.yaml: invalid YAML: unacceptable character #x00")
    assert "\n" not in str(caught.value)
