"""TIFF through tifffile (issue 16): BigTIFF, tiled, pyramids (their first level), 8/16-bit, pages as frames, and
the size limit checked from the header before anything is decoded."""

from __future__ import annotations

import io

import numpy as np
import pytest
import tifffile
from PIL import Image, ImageOps

import app.io.tiff as tiff
from app.errors import ImageError
from app.io.images import read_image


def _plane(shape, dtype=np.uint8, seed=0) -> np.ndarray:
    top = np.iinfo(dtype).max if np.dtype(dtype).kind == "u" else 1.0
    return (np.random.default_rng(seed).random(shape) * top).astype(dtype)


def _no_pillow(monkeypatch):
    """Fail the test if Pillow is asked to open the file: tifffile must have decoded it."""
    def refuse(*args, **kwargs):
        raise AssertionError("Pillow decoded a TIFF that tifffile should have")
    monkeypatch.setattr("app.io.images.Image.open", refuse)


def test_tiled_bigtiff_rgb(tmp_path, monkeypatch):
    pixels = _plane((70, 90, 3))
    tifffile.imwrite(tmp_path / "t.tif", pixels, tile=(32, 32), bigtiff=True, photometric="rgb")
    assert tifffile.TiffFile(tmp_path / "t.tif").is_bigtiff
    _no_pillow(monkeypatch)
    decoded = read_image(tmp_path / "t.tif")
    assert decoded.source_mode == "RGB" and decoded.frame_count == 1
    np.testing.assert_array_equal(decoded.pixels, pixels)


def test_planar_rgb_is_interleaved(tmp_path, monkeypatch):
    pixels = _plane((3, 20, 30))
    tifffile.imwrite(tmp_path / "p.tif", pixels, photometric="rgb", planarconfig="separate")
    _no_pillow(monkeypatch)
    np.testing.assert_array_equal(read_image(tmp_path / "p.tif").pixels, np.moveaxis(pixels, 0, -1))


@pytest.mark.parametrize("layout", ["subifds", "main chain", "ome"])
def test_a_pyramid_gives_its_full_resolution_level(tmp_path, monkeypatch, layout):
    full, half = _plane((64, 96), seed=1), _plane((32, 48), seed=2)
    path = tmp_path / f"pyramid_{layout.replace(' ', '_')}.tif"
    with tifffile.TiffWriter(path, ome=layout == "ome") as writer:
        writer.write(full, tile=(16, 16), subifds=0 if layout == "main chain" else 1, photometric="minisblack")
        writer.write(half, tile=(16, 16), subfiletype=1, photometric="minisblack")
    with tifffile.TiffFile(path) as tif:
        assert len(tif.series[0].levels) == 2
    _no_pillow(monkeypatch)
    decoded = read_image(path)
    assert decoded.frame_count == 1 and decoded.pixels.shape == (64, 96)
    np.testing.assert_array_equal(decoded.pixels, full)


def test_sixteen_bit_gray_keeps_its_values(tmp_path, monkeypatch):
    values = np.array([[0, 257 * 100, 65535, 1000]], np.uint16)
    tifffile.imwrite(tmp_path / "d.tif", values, tile=(16, 16))
    _no_pillow(monkeypatch)
    decoded = read_image(tmp_path / "d.tif")
    assert decoded.source_mode == "I;16" and decoded.pixels.tolist() == [[0, 100, 255, 3]]
    np.testing.assert_array_equal(decoded.raw, values.astype(np.float32))
    assert decoded.window is not None


def test_float_and_sixteen_bit_rgb(tmp_path, monkeypatch):
    tifffile.imwrite(tmp_path / "f.tif", np.array([[0.0, 0.5, 1.0]], np.float32))
    tifffile.imwrite(tmp_path / "rgb16.tif", np.full((4, 4, 3), 257 * 9, np.uint16), photometric="rgb")
    _no_pillow(monkeypatch)
    assert read_image(tmp_path / "f.tif").pixels.tolist() == [[0, 128, 255]]
    rgb = read_image(tmp_path / "rgb16.tif")
    assert rgb.pixels.dtype == np.uint8 and rgb.pixels.shape == (4, 4, 3) and (rgb.pixels == 9).all()


def test_three_pages_are_three_frames(tmp_path, monkeypatch):
    stack = _plane((3, 20, 30), seed=3)
    tifffile.imwrite(tmp_path / "s.tif", stack, photometric="minisblack")
    _no_pillow(monkeypatch)
    assert read_image(tmp_path / "s.tif").frame_count == 3
    for frame in range(3):
        np.testing.assert_array_equal(read_image(tmp_path / "s.tif", frame=frame).pixels, stack[frame])
    with pytest.raises(ImageError, match=r"s.tif: frame 3 does not exist \(the file has 3\)"):
        read_image(tmp_path / "s.tif", frame=3)


def test_pages_of_different_sizes_are_frames(tmp_path, monkeypatch):
    with tifffile.TiffWriter(tmp_path / "m.tif") as writer:
        writer.write(_plane((8, 8)), photometric="minisblack")
        writer.write(_plane((10, 12), seed=4), photometric="minisblack")
    _no_pillow(monkeypatch)
    assert read_image(tmp_path / "m.tif").frame_count == 2
    np.testing.assert_array_equal(read_image(tmp_path / "m.tif", frame=1).pixels, _plane((10, 12), seed=4))


def test_too_many_pixels_is_refused_before_decoding(tmp_path, monkeypatch):
    tifffile.imwrite(tmp_path / "big.tif", _plane((200, 300)), tile=(64, 64))
    monkeypatch.setattr(tiff.TiffPlanes, "read", lambda *a: pytest.fail("decoded"))
    _no_pillow(monkeypatch)
    with pytest.raises(ImageError) as caught:
        read_image(tmp_path / "big.tif", max_pixels=50_000)  # 60,000 pixels in 64×64 tiles of 4,096 each
    message = str(caught.value)
    assert message.startswith(str(tmp_path / "big.tif")) and "image too large (300×200" in message
    assert "\n" not in message


def test_a_header_claiming_a_huge_image_is_refused(tmp_path):
    """A 64×64 tiled file whose header is rewritten to claim 60,000 × 60,000 pixels (3.6 gigapixels)."""
    path = tmp_path / "huge.tif"
    tifffile.imwrite(path, _plane((64, 64)), tile=(32, 32))
    with tifffile.TiffFile(path, mode="r+b") as tif:
        tif.pages[0].tags["ImageWidth"].overwrite(60_000)
        tif.pages[0].tags["ImageLength"].overwrite(60_000)
    with pytest.raises(ImageError, match=r"huge.tif: image too large \(60000×60000 = 3600 megapixels"):
        read_image(path)


def test_what_tifffile_cannot_decode_goes_to_pillow(tmp_path, monkeypatch):
    pixels = _plane((20, 30, 3))
    Image.fromarray(pixels).save(tmp_path / "c.tif", compression="tiff_lzw")
    monkeypatch.setattr(tiff.TiffPlanes, "read", lambda *a: None)  # as without imagecodecs for LZW
    np.testing.assert_array_equal(read_image(tmp_path / "c.tif").pixels, pixels)


@pytest.mark.parametrize("orientation", range(1, 9))
def test_the_orientation_tag_is_applied_as_for_jpeg_exif(tmp_path, orientation):
    """Pillow's TIFF path left the Orientation tag unapplied; tifffile's applies it as EXIF's is for JPEG/PNG."""
    pixels = _plane((10, 20, 3), seed=5)
    tifffile.imwrite(tmp_path / "o.tif", pixels, photometric="rgb", extratags=[(274, "H", 1, orientation, True)])
    expected = ImageOps.exif_transpose(_with_exif_orientation(pixels, orientation))
    np.testing.assert_array_equal(read_image(tmp_path / "o.tif").pixels, np.asarray(expected))


def _with_exif_orientation(pixels: np.ndarray, orientation: int) -> Image.Image:
    image = Image.fromarray(pixels)
    exif = image.getexif()
    exif[0x0112] = orientation
    buffer = io.BytesIO()
    image.save(buffer, "PNG", exif=exif)
    return Image.open(io.BytesIO(buffer.getvalue()))


@pytest.mark.filterwarnings("ignore:Corrupt EXIF data")  # Pillow's, on the fallback path, as before
def test_damaged_tiff_gets_one_line_error(tmp_path):
    tifffile.imwrite(tmp_path / "d.tif", _plane((50, 50)))
    data = (tmp_path / "d.tif").read_bytes()
    (tmp_path / "d.tif").write_bytes(data[:40])
    with pytest.raises(ImageError) as caught:
        read_image(tmp_path / "d.tif")
    assert str(caught.value).startswith(str(tmp_path / "d.tif") + ": ") and "\n" not in str(caught.value)


@pytest.mark.parametrize("compression", ["lzw", "jpeg"])
def test_compressed_tiles_with_imagecodecs(tmp_path, monkeypatch, compression):
    """LZW and JPEG (slide scanners' pyramids) need imagecodecs, the fast-decode extra; without it Pillow reads
    them (test_what_tifffile_cannot_decode_goes_to_pillow)."""
    pytest.importorskip("imagecodecs")
    pixels = _plane((64, 80, 3), seed=6)
    tifffile.imwrite(tmp_path / "c.tif", pixels, tile=(32, 32), photometric="rgb", compression=compression)
    with Image.open(tmp_path / "c.tif") as img:
        pillows = np.asarray(img.convert("RGB"))  # lossy JPEG: what Pillow (libtiff + libjpeg) makes of it
    _no_pillow(monkeypatch)
    decoded = read_image(tmp_path / "c.tif").pixels
    np.testing.assert_array_equal(decoded, pixels if compression == "lzw" else pillows)
