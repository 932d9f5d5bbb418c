"""packaging/build.py's strip of the frozen folder's libraries: symbol tables and debugging sections go, and a library
the dynamic loader would then refuse (binutils' strip misplaces the segments of some that patchelf rewrote, as
numpy's OpenBLAS) is put back as it was. Linux with binutils only, like the build step."""

from __future__ import annotations

import ctypes
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO
from test_icons import load_module

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("strip") is None,
                                reason="the strip step runs on Linux with binutils")


@pytest.fixture(scope="module")
def build():
    return load_module("seglens_build_strip", REPO / "packaging" / "build.py")


def _copy(source: Path, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / source.name
    shutil.copy2(source, target)
    return target


def test_numpys_openblas_stays_loadable_and_the_others_lose_their_symbol_tables(build, tmp_path):
    libs = Path(np.__file__).parent.parent / "numpy.libs"
    openblas = next(libs.glob("libscipy_openblas*.so"), None)
    if openblas is None:
        pytest.skip("this numpy bundles no OpenBLAS of its own")
    import cryptography.hazmat.bindings._rust as rust

    copied_openblas = _copy(openblas, tmp_path / "numpy.libs")
    copied_rust = _copy(Path(rust.__file__), tmp_path / "cryptography")
    before = copied_rust.stat().st_size
    build.strip_debug_info(tmp_path)
    assert build.segments_aligned(copied_openblas.read_bytes())
    ctypes.CDLL(str(copied_openblas))  # the loader takes it ("address/offset not page-aligned" before the check)
    assert copied_rust.stat().st_size < before
    assert " .symtab " not in build.subprocess.run(["readelf", "-S", "-W", str(copied_rust)], capture_output=True,
                                                   text=True, check=True).stdout


def test_a_load_segment_off_its_alignment_is_seen(build):
    header = bytearray(64 + 56)
    header[:6] = b"\x7fELF\x02\x01"
    header[0x20:0x28] = (64).to_bytes(8, "little")  # program headers right after the ELF header
    header[0x36:0x38] = (56).to_bytes(2, "little")
    header[0x38:0x3A] = (1).to_bytes(2, "little")

    def segment(offset: int, address: int) -> bytes:
        return bytes(header[:64]) + (1).to_bytes(4, "little") + bytes(4) + offset.to_bytes(8, "little") + \
            address.to_bytes(8, "little") + bytes(24) + (0x1000).to_bytes(8, "little")

    assert build.segments_aligned(segment(0x2098, 0x5098))
    assert not build.segments_aligned(segment(0x1621098, 0x166B000))
