"""Whole-or-nothing files: permissions, temporaries and what a killed run leaves behind."""

from __future__ import annotations

import os
import stat
import sys
import time

import numpy as np
import pytest

from app.io.files import (
    TEMPORARY_PREFIX,
    atomic_write,
    create_temporary,
    encode_png,
    is_complete_png,
    remove_stale_temporaries,
    whole_folder,
)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")
@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_outputs_honour_the_umask(tmp_path, umask, mode):
    previous = os.umask(umask)
    try:
        atomic_write(tmp_path / "a_mask.png", encode_png(np.zeros((3, 4), np.uint8)))
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "a_mask.png").stat().st_mode) == mode


def test_only_old_seglens_temporaries_are_removed(tmp_path):
    started = time.time()
    keep = tmp_path / "keep"
    keep.mkdir()
    users = [keep / ".important.tmp", tmp_path / ".notes.tmp", tmp_path / ".a.png.x1y2.tmp"]
    for path in users:
        path.write_text("the user's")
        os.utime(path, (started - 3600, started - 3600))
    fd, old = create_temporary(keep, "a_mask.png")  # a killed run's
    os.close(fd)
    os.utime(old, (started - 60, started - 60))
    fd, fresh = create_temporary(tmp_path, "b_mask.png")  # a concurrent run's, in flight
    os.close(fd)
    os.utime(fresh, (started + 1, started + 1))
    assert remove_stale_temporaries(tmp_path, older_than=started) == 1
    assert not old.exists() and fresh.exists() and all(p.read_text() == "the user's" for p in users)


@pytest.mark.skipif(sys.platform == "win32", reason="symlinks")
def test_stale_temporaries_are_looked_for_inside_the_folder_only(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    fd, outside = create_temporary(elsewhere, "x.png")
    os.close(fd)
    os.utime(outside, (1, 1))
    out = tmp_path / "out"
    out.mkdir()
    (out / "link").symlink_to(elsewhere)
    (out / f"{TEMPORARY_PREFIX}link.tmp").symlink_to(outside)
    assert remove_stale_temporaries(out) == 0
    assert outside.exists()


def test_a_complete_png_is_told_from_an_empty_or_cut_one(tmp_path):
    png = encode_png(np.zeros((30, 40), np.uint8))
    cases = {"whole": png, "empty": b"", "cut": png[:-1], "head_only": png[:40], "not_png": b"x" * 200}
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
    assert {name: is_complete_png(tmp_path / name) for name in cases} == {name: name == "whole" for name in cases}
    assert not is_complete_png(tmp_path) and not is_complete_png(tmp_path / "missing.png")


def test_a_long_file_name_still_gets_a_temporary_that_fits(tmp_path):
    path = tmp_path / ("x" * 240 + "_mask.png")  # 249 bytes: fits NAME_MAX (255), a `.<name>.<random>.tmp` did not
    atomic_write(path, b"data")
    assert path.read_bytes() == b"data" and [p.name for p in tmp_path.iterdir()] == [path.name]


def _chunks(png: bytes) -> list[tuple[bytes, bytes, int]]:
    """(type, data, stored CRC) of every chunk."""
    chunks, at = [], 8
    while at < len(png):
        length = int.from_bytes(png[at:at + 4], "big")
        kind, data = png[at + 4:at + 8], png[at + 8:at + 8 + length]
        chunks.append((kind, data, int.from_bytes(png[at + 8 + length:at + 12 + length], "big")))
        at += 12 + length
    return chunks


@pytest.mark.parametrize("pixels", [np.arange(12, dtype=np.uint8).reshape(3, 4),
                                    np.arange(12, dtype=np.uint16).reshape(3, 4) * 5000,
                                    np.arange(36, dtype=np.uint8).reshape(3, 4, 3)])
def test_text_chunks_go_after_ihdr_with_valid_crcs_and_leave_the_pixels_alone(pixels):
    import io
    import zlib

    from PIL import Image

    from app.io.files import png_text, png_with_text

    png = encode_png(pixels)
    text = {"SegLens": '{"model_sha256":"0123456789ab","thresholds":{"threshold":0.3}}', "Software": "SegLens x",
            "Note": "naïve ünïcödé €"}  # € is not Latin-1: an iTXt chunk
    tagged = png_with_text(png, text)
    chunks = _chunks(tagged)
    assert [c[0] for c in chunks[:4]] == [b"IHDR", b"tEXt", b"tEXt", b"iTXt"]
    assert all(zlib.crc32(kind + data) == crc for kind, data, crc in chunks)
    assert [c for c in chunks if c[0] not in (b"tEXt", b"iTXt")] == _chunks(png)  # pixels: the same bytes
    image = Image.open(io.BytesIO(tagged))
    assert image.text == text and image.info["SegLens"] == text["SegLens"]
    np.testing.assert_array_equal(np.asarray(image), pixels)
    assert png_text(tagged) == text and png_text(png) == {}
    assert png_with_text(png, {}) == png


def test_text_chunks_keep_a_png_complete_and_refuse_bad_input(tmp_path):
    from app.io.files import png_text, png_with_text

    path = tmp_path / "a_mask.png"
    atomic_write(path, png_with_text(encode_png(np.zeros((5, 6), np.uint8)), {"SegLens": "{}"}))
    assert is_complete_png(path) and png_text(path) == {"SegLens": "{}"}
    with pytest.raises(ValueError):
        png_with_text(b"not a png", {"a": "b"})
    for key in ("", "x" * 80, " lead", "nul\0"):
        with pytest.raises(ValueError):
            png_with_text(encode_png(np.zeros((2, 2), np.uint8)), {key: "v"})
    corrupt = bytearray(png_with_text(encode_png(np.zeros((2, 2), np.uint8)), {"k": "v"}))
    corrupt[41] ^= 1  # a byte of the text chunk's data: its CRC no longer matches, the item is not trusted
    assert png_text(bytes(corrupt)) == {}


def test_a_whole_folder_replaces_the_earlier_one_only_once_written(tmp_path):
    out = tmp_path / "series_sc"
    out.mkdir()
    (out / "old.dcm").write_bytes(b"old")
    with pytest.raises(RuntimeError), whole_folder(out) as partial:
        (partial / "sc_0001.dcm").write_bytes(b"new")
        raise RuntimeError("the second slice failed")
    assert [p.name for p in tmp_path.iterdir()] == ["series_sc"]  # no partial folder left, the old one kept
    assert [p.name for p in out.iterdir()] == ["old.dcm"]
    with whole_folder(out) as partial:
        (partial / "sc_0001.dcm").write_bytes(b"new")
        assert not (out / "sc_0001.dcm").exists()  # nothing half-written shows under the name meanwhile
    assert [p.name for p in tmp_path.iterdir()] == ["series_sc"]
    assert [(p.name, p.read_bytes()) for p in out.iterdir()] == [("sc_0001.dcm", b"new")]
