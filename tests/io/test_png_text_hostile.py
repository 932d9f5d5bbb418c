"""png_text (provenance, `seglens-cli info`, review marks) reads a PNG someone else may have made: it reads chunk
headers and skips the pixel data rather than loading the file, and a compressed text chunk is inflated only up to
a bound (a 1 KB zTXt can expand to gigabytes)."""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
import pytest

from app.io.files import encode_png, png_text, png_with_text


def _chunk(kind: bytes, data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + kind + data + zlib.crc32(kind + data).to_bytes(4, "big")


def _with_chunk(png: bytes, chunk: bytes) -> bytes:
    end_of_ihdr = 8 + 12 + int.from_bytes(png[8:12], "big")
    return png[:end_of_ihdr] + chunk + png[end_of_ihdr:]


def test_a_compressed_text_bomb_is_refused(tmp_path: Path) -> None:
    bomb = zlib.compress(b"A" * (64 << 20), 9)  # 64 MiB of text in about 64 KB
    path = tmp_path / "bomb.png"
    path.write_bytes(_with_chunk(encode_png(np.zeros((4, 4), np.uint8)), _chunk(b"zTXt", b"SegLens\0\0" + bomb)))
    with pytest.raises(ValueError, match="expands past"):
        png_text(path)


def test_text_items_are_read_around_the_pixel_data(tmp_path: Path) -> None:
    png = png_with_text(encode_png(np.arange(64, dtype=np.uint8).reshape(8, 8)), {"a": "1", "b": "é ü"})
    path = tmp_path / "x.png"
    path.write_bytes(png + _chunk(b"tEXt", b"after\0IEND"))  # after IEND: not read
    assert png_text(path) == {"a": "1", "b": "é ü"} == png_text(png)


def test_a_cut_short_png_gives_the_items_before_the_cut(tmp_path: Path) -> None:
    png = png_with_text(encode_png(np.zeros((8, 8), np.uint8)), {"a": "1"})
    path = tmp_path / "cut.png"
    path.write_bytes(png[:-20])
    assert png_text(path) == {"a": "1"}
