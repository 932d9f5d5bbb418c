"""Hostile sidecars: alias bombs, huge files and huge values must fail fast, in one line, in bounded memory."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from app.errors import SidecarError
from app.inference.model.sidecar import MAX_SIDECAR_BYTES, load_sidecar

ROOT = Path(__file__).resolve().parents[3]


def _alias_bomb() -> str:
    """'Billion laughs': nine levels, each a list of nine aliases to the level below (9**9 leaves, < 1 KB)."""
    levels = [f"  - &a{n} [{', '.join([f'*a{n - 1}'] * 9) if n else ', '.join('x' * 9)}]" for n in range(9)]
    return "postprocess:\n  top_k:\n" + "\n".join(levels) + "\n"  # top_k's check formats the value it refuses


def test_alias_bomb_is_refused_quickly_in_bounded_memory(tmp_path):
    """The aliases must be refused before anything expands them: the error message used to repr 9**9 items.
    Run in a child process with a 1 GiB address-space limit and a timeout, so a regression cannot take the host."""
    sidecar = tmp_path / "bomb.yaml"
    sidecar.write_text(_alias_bomb())
    assert sidecar.stat().st_size < 1000
    script = textwrap.dedent(f"""
        import resource, sys
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
        from pathlib import Path
        from app.errors import SidecarError
        from app.inference.model.sidecar import load_sidecar
        try:
            load_sidecar(Path({str(sidecar)!r}))
        except SidecarError as exc:
            print(exc)
            sys.exit(0)
        sys.exit(3)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-500:]
    line = done.stdout.strip()
    assert line.startswith(str(sidecar)) and "anchors/aliases are not allowed" in line
    assert "\n" not in line and len(line) < 300


@pytest.mark.parametrize("text", ["name: &n seg\ntask: *n\n", "input: &i {scale: 1}\n"])
def test_any_anchor_or_alias_is_refused(tmp_path, text):
    sidecar = tmp_path / "m.yaml"
    sidecar.write_text(text)
    with pytest.raises(SidecarError, match=r"anchors/aliases are not allowed in a sidecar") as caught:
        load_sidecar(sidecar)
    assert str(caught.value).startswith(str(sidecar))


def test_oversized_sidecar_is_refused_before_parsing(tmp_path):
    sidecar = tmp_path / "big.yaml"
    sidecar.write_text("name: seg\n" + "#" * MAX_SIDECAR_BYTES + "\n")
    with pytest.raises(SidecarError) as caught:
        load_sidecar(sidecar)
    message = str(caught.value)
    assert message.startswith(str(sidecar)) and "too large" in message and "1 MiB" in message


@pytest.mark.parametrize("text", [
    "postprocess:\n  top_k: [" + ", ".join(["123456789"] * 20000) + "]\n",
    "task: " + "s" * 200000 + "\n",
    "input:\n  size: [[[[[[[[[[[1, 2, 3, 4, 5, 6, 7, 8, 9]]]]]]]]]]]\n",
    "input:\n  " + "k" * 1000 + ": 1\n",  # YAML itself refuses plain keys over 1024 characters
    "classes:\n  - {name: a, " + "c" * 1000 + ": 1}\n",
])
def test_values_in_error_messages_are_capped(tmp_path, text):
    """A refused value is shown shortened: a message stays one readable line whatever the sidecar holds."""
    sidecar = tmp_path / "m.yaml"
    sidecar.write_text(text)
    with pytest.raises(SidecarError) as caught:
        load_sidecar(sidecar)
    message = str(caught.value)
    assert message.startswith(str(sidecar)) and len(message) < len(str(sidecar)) + 400, message[:600]


@pytest.mark.parametrize("text", ["postprocess:\n  top_k: " + "1" * 5000 + "\n",
                                  "postprocess:\n  top_k: !!int '" + "1" * 5000 + "'\n",
                                  "name: !!timestamp 2001-13-45\n"])
def test_values_yaml_cannot_construct_are_a_sidecar_error(tmp_path, text):
    """PyYAML raises a bare ValueError for an integer over Python's 4300-digit limit or an impossible date;
    that escaped as an 'unexpected error'. (A plain value that long, and a timestamp tag, are refused before
    anything is built since the loader keeps to the YAML 1.2 core schema; a plain date is text.)"""
    sidecar = tmp_path / "m.yaml"
    sidecar.write_text(text)
    with pytest.raises(SidecarError, match="invalid YAML|is not allowed in a sidecar") as caught:
        load_sidecar(sidecar)
    assert str(caught.value).startswith(str(sidecar)) and len(str(caught.value)) < len(str(sidecar)) + 300
