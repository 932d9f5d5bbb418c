"""The fast PNG decoders give exactly what Pillow gives, for every kind of PNG, with either decoder (issue 16).

"Identical" means: for plain 8-bit RGB/gray, the same uint8 array as Pillow's; for 16-bit gray, the same values
(`raw`) and the same uint8 pixels (value // 257); gAMA and iCCP are ignored by Pillow, by libpng as imagecodecs
and OpenCV call it, and so by us (the same bytes); palette, RGBA and 16-bit RGB files go through Pillow as before;
Adam7-interlaced files decode to the same pixels; an EXIF orientation is applied wherever its chunk lies.
"""

from __future__ import annotations

import io
import struct
import zlib

import numpy as np
import pytest
from PIL import Image, ImageCms, ImageOps

import app.io.images as images
import app.io.png as png
from app.errors import ImageError
from app.io.images import read_image

# Adam7 passes: x0, y0, dx, dy
ADAM7 = ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2))


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def _encode(pixels: np.ndarray, *, interlace: bool = False, before: tuple = (), after: tuple = ()) -> bytes:
    """A PNG written by hand (Pillow writes no interlaced PNGs): filter 0, optional Adam7, extra chunks placed
    before or after the pixels."""
    deep = pixels.dtype == np.uint16
    channels = 1 if pixels.ndim == 2 else pixels.shape[2]
    color_type = {1: 0, 3: 2, 4: 6}[channels]
    height, width = pixels.shape[:2]
    big_endian = pixels.astype(">u2") if deep else pixels

    def scanlines(image: np.ndarray) -> bytes:
        rows = image.reshape(image.shape[0], -1)
        return b"".join(b"\x00" + row.tobytes() for row in rows) if image.size else b""

    if interlace:
        raw = b"".join(scanlines(big_endian[y0::dy, x0::dx]) for x0, y0, dx, dy in ADAM7)
    else:
        raw = scanlines(big_endian)
    header = struct.pack(">IIBBBBB", width, height, 16 if deep else 8, color_type, 0, 0, int(interlace))
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + b"".join(_chunk(*c) for c in before)
            + _chunk(b"IDAT", zlib.compress(raw, 6)) + b"".join(_chunk(*c) for c in after) + _chunk(b"IEND", b""))


def _exif(orientation: int) -> bytes:
    exif = Image.Exif()
    exif[0x0112] = orientation
    return exif.tobytes()


def _pillow_reference(path) -> tuple[np.ndarray, np.ndarray | None]:
    """What read_image gave before issue 16: Pillow decodes, orientation applied, 16-bit mapped by // 257."""
    with Image.open(path) as img:
        img = ImageOps.exif_transpose(img) or img
        raw = np.asarray(img).astype(np.float32) if img.mode.startswith("I;16") else None
        return images._to_array(img), raw


def _frame(shape, dtype=np.uint8) -> np.ndarray:
    rng = np.random.default_rng(7)
    top = 65535 if dtype == np.uint16 else 255
    y, x = np.mgrid[0 : shape[0], 0 : shape[1]]
    smooth = (top / 2 + top / 3 * np.sin(x / 5.0) * np.cos(y / 3.0)).astype(dtype)
    if len(shape) == 2:
        return smooth
    return np.stack([smooth, smooth[::-1], rng.integers(0, top, shape[:2], dtype)][: shape[2]]
                    + [rng.integers(0, top, shape[:2], dtype)] * (shape[2] - 3), -1)


SRGB = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()
CASES = {
    "rgb": lambda: _encode(_frame((37, 53, 3))),
    "gray": lambda: _encode(_frame((37, 53))),
    "gray16": lambda: _encode(_frame((37, 53), np.uint16)),
    "rgba": lambda: _encode(_frame((37, 53, 4))),
    "rgb16": lambda: _encode(_frame((37, 53, 3), np.uint16)),
    "rgb_adam7": lambda: _encode(_frame((37, 53, 3)), interlace=True),
    "gray16_adam7": lambda: _encode(_frame((37, 53), np.uint16), interlace=True),
    "rgb_gama": lambda: _encode(_frame((37, 53, 3)), before=((b"gAMA", struct.pack(">I", 100000)),)),
    "rgb_iccp": lambda: _encode(_frame((37, 53, 3)), before=((b"iCCP", b"sRGB\x00\x00" + zlib.compress(SRGB)),)),
    "rgb_exif_before": lambda: _encode(_frame((37, 53, 3)), before=((b"eXIf", _exif(6)),)),
    "rgb_exif_after": lambda: _encode(_frame((37, 53, 3)), after=((b"eXIf", _exif(6)),)),
    "palette": lambda: _save_with_pillow(Image.fromarray(_frame((37, 53, 3))).convert("P")),
}
# Decoded without Pillow; 16-bit gray only by imagecodecs (OpenCV is no faster than Pillow there), and not when
# interlaced (imagecodecs leaves Adam7 to OpenCV: libpng logs a warning for each such file).
FAST = {"rgb", "gray", "gray16", "rgb_adam7", "rgb_gama", "rgb_iccp"}


def _save_with_pillow(img: Image.Image) -> bytes:
    buffer = io.BytesIO()
    img.save(buffer, "PNG")
    return buffer.getvalue()


@pytest.fixture(params=["imagecodecs", "opencv"])
def decoder(request, monkeypatch):
    if request.param == "opencv":
        monkeypatch.setattr(png, "_imagecodecs", lambda: None)  # as where the fast-decode extra is missing
    elif png.decoder_name() != "imagecodecs":
        pytest.skip("imagecodecs (the fast-decode extra) is not installed")
    return request.param


@pytest.mark.parametrize("case", sorted(CASES))
def test_identical_pixels_with_either_decoder(tmp_path, monkeypatch, decoder, case):
    path = tmp_path / f"{case}.png"
    path.write_bytes(CASES[case]())
    used = []
    real = png.decode_png
    monkeypatch.setattr(images, "decode_png", lambda *a, **k: used.append(real(*a, **k)) or used[-1])
    decoded = read_image(path)
    pixels, raw = _pillow_reference(path)
    assert decoded.pixels.dtype == np.uint8
    np.testing.assert_array_equal(decoded.pixels, pixels)
    if raw is None:
        assert decoded.raw is None
    else:
        np.testing.assert_array_equal(decoded.raw, raw)
    fast = bool(used) and used[0] is not None
    assert fast == (case in FAST and not (decoder == "opencv" and case == "gray16"))


def test_orientation_after_the_pixels_is_still_applied(tmp_path):
    path = tmp_path / "late.png"
    path.write_bytes(CASES["rgb_exif_after"]())
    assert png.metadata_after_pixels(path.read_bytes())
    assert read_image(path).pixels.shape == (53, 37, 3)  # orientation 6: rotated


def test_plain_png_has_no_metadata_after_its_pixels(tmp_path):
    assert not png.metadata_after_pixels(CASES["rgb_exif_before"]())
    assert not png.metadata_after_pixels(_save_with_pillow(Image.new("RGB", (5, 5))))


@pytest.mark.parametrize("damage", ["truncated", "bad_idat"])
def test_damaged_png_gets_the_same_one_line_error(tmp_path, decoder, damage):
    data = _encode(np.random.default_rng(0).integers(0, 255, (120, 90, 3), np.uint8))
    if damage == "truncated":
        data = data[: len(data) // 2]
    else:
        start = data.index(b"IDAT") + 40
        data = data[:start] + bytes(64) + data[start + 64 :]
    path = tmp_path / f"{damage}.png"
    path.write_bytes(data)
    with pytest.raises(ImageError, match=rf"{damage}.png: damaged or truncated image") as err:
        read_image(path)
    assert "\n" not in str(err.value)


def test_libpng_warnings_are_not_logged(tmp_path, caplog, decoder):
    """imagecodecs logs libpng's warnings (which a CLI run would print on stderr for every such file)."""
    path = tmp_path / "short_icc.png"
    path.write_bytes(_encode(_frame((8, 8, 3)), before=((b"iCCP", b"x\x00\x00" + zlib.compress(b"short")),)))
    with caplog.at_level("WARNING"):
        assert read_image(path).pixels.shape == (8, 8, 3)
    assert not [r for r in caplog.records if r.name.startswith("imagecodecs")]
