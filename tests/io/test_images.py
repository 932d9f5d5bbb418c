"""Decoding what people drop: orientation, modes, bit depths, and one-line errors for bad files."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from app.errors import ImageError
from app.io.images import read_image


def test_exif_orientation_is_applied(tmp_path):
    pixels = np.zeros((10, 20, 3), np.uint8)
    pixels[:, :5] = 255  # white band on the left of the stored image
    image = Image.fromarray(pixels)
    exif = image.getexif()
    exif[0x0112] = 6  # rotate 90° clockwise to display
    path = tmp_path / "rotated.jpg"
    image.save(path, exif=exif, quality=95)
    decoded = read_image(path)
    assert (decoded.height, decoded.width) == (20, 10)
    assert decoded.pixels[:5].mean() > 200 and decoded.pixels[-5:].mean() < 50  # band now on top


def test_palette_rgba_and_gray_modes(tmp_path):
    rgba = np.zeros((4, 4, 4), np.uint8)
    rgba[..., 0] = 200
    rgba[..., 3] = 128  # half transparent red over black
    Image.fromarray(rgba, "RGBA").save(tmp_path / "a.png")
    assert read_image(tmp_path / "a.png").pixels[0, 0].tolist() == [100, 0, 0]
    Image.fromarray(rgba[..., :3]).convert("P").save(tmp_path / "p.png")
    assert read_image(tmp_path / "p.png").pixels.shape == (4, 4, 3)
    Image.fromarray(np.full((4, 4), 7, np.uint8)).save(tmp_path / "g.png")
    gray = read_image(tmp_path / "g.png")
    assert gray.is_gray and gray.pixels[0, 0] == 7


def test_sixteen_bit_uses_the_full_range(tmp_path):
    values = np.array([[0, 257 * 100, 65535]], np.uint16)
    Image.fromarray(values).save(tmp_path / "deep.png")
    decoded = read_image(tmp_path / "deep.png")
    assert decoded.pixels.tolist() == [[0, 100, 255]]


def test_cmyk_is_converted(tmp_path):
    Image.new("CMYK", (5, 5), (0, 255, 255, 0)).save(tmp_path / "c.jpg")
    pixel = read_image(tmp_path / "c.jpg").pixels[2, 2]
    assert pixel[0] > 200 and pixel[1] < 60


@pytest.mark.parametrize(
    "name, content, problem",
    [
        ("empty.png", b"", "empty file (0 bytes)"),
        ("text.png", b"hello, I am not a picture", "not an image"),
    ],
)
def test_bad_files_get_one_line_errors(tmp_path, name, content, problem):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(ImageError) as err:
        read_image(path)
    assert str(path) in str(err.value) and problem in str(err.value) and "\n" not in str(err.value)


def test_truncated_png(tmp_path):
    Image.fromarray(np.random.default_rng(0).integers(0, 255, (200, 200, 3), np.uint8)).save(tmp_path / "t.png")
    data = (tmp_path / "t.png").read_bytes()
    (tmp_path / "t.png").write_bytes(data[: len(data) // 2])
    with pytest.raises(ImageError, match=r"t.png: damaged or truncated image"):
        read_image(tmp_path / "t.png")


def test_missing_file(tmp_path):
    with pytest.raises(ImageError, match="nothing.png: file not found"):
        read_image(tmp_path / "nothing.png")


def test_pixel_limit(tmp_path):
    Image.new("L", (100, 100)).save(tmp_path / "big.png")
    with pytest.raises(ImageError, match=r"big.png: image too large \(100×100"):
        read_image(tmp_path / "big.png", max_pixels=5000)


def _pillow_pixels(path) -> np.ndarray:
    with Image.open(path) as img:
        return np.asarray(img)


@pytest.mark.parametrize("name, mode, options", [
    ("rgb.jpg", "RGB", {"quality": 90}), ("rgb_progressive.jpg", "RGB", {"quality": 80, "progressive": True}),
    ("gray.jpg", "L", {"quality": 90}), ("rgb.png", "RGB", {}), ("gray.png", "L", {}),
    ("interlaced.png", "RGB", {"interlace": 1}), ("subsampled.jpg", "RGB", {"quality": 70, "subsampling": 2}),
])
def test_fast_decode_gives_exactly_pillows_pixels(tmp_path, monkeypatch, name, mode, options):
    import app.io.images as images

    fast = []
    real = images._decode_fast
    monkeypatch.setattr(images, "_decode_fast", lambda *a: fast.append(real(*a)) or fast[-1])
    rng = np.random.default_rng(1)
    y, x = np.mgrid[0:61, 0:83]
    base = (100 + 60 * np.sin(x / 7.0) * np.cos(y / 5.0)).astype(np.uint8)
    pixels = base if mode == "L" else np.stack([base, base[::-1], rng.integers(0, 255, base.shape, np.uint8)], -1)
    path = tmp_path / name
    Image.fromarray(pixels, mode).save(path, **options)
    decoded = read_image(path)
    assert decoded.source_mode == mode and decoded.pixels.dtype == np.uint8
    np.testing.assert_array_equal(decoded.pixels, _pillow_pixels(path))
    assert fast and fast[0] is not None  # decoded without Pillow (imagecodecs or OpenCV)


def test_truncated_jpeg_is_an_error_not_grey_padding(tmp_path):
    rng = np.random.default_rng(2)
    Image.fromarray(rng.integers(0, 255, (300, 300, 3), np.uint8)).save(tmp_path / "t.jpg", quality=90)
    data = (tmp_path / "t.jpg").read_bytes()
    (tmp_path / "t.jpg").write_bytes(data[: len(data) * 2 // 3])
    with pytest.raises(ImageError, match=r"t.jpg: damaged or truncated image"):
        read_image(tmp_path / "t.jpg")


def test_sixteen_bit_rgb_png_keeps_pillows_conversion(tmp_path):
    import cv2

    pixels = (np.arange(40 * 30 * 3, dtype=np.uint16).reshape(40, 30, 3) * 50).astype(np.uint16)
    cv2.imwrite(str(tmp_path / "deep.png"), pixels[..., ::-1])  # 48-bit RGB PNG
    np.testing.assert_array_equal(read_image(tmp_path / "deep.png").pixels, _pillow_pixels(tmp_path / "deep.png"))


def test_a_large_later_tiff_frame_is_checked(tmp_path):
    """Frame 0 is 8×8, frame 1 is 100×100: the viewer's frame slider decodes frame 1 by itself, so the size
    checked must be that frame's, not the first one's."""
    path = tmp_path / "pages.tif"
    small, large = Image.new("L", (8, 8)), Image.new("L", (100, 100))
    small.save(path, save_all=True, append_images=[large])
    assert read_image(path, max_pixels=1000).frame_count == 2
    with pytest.raises(ImageError) as caught:
        read_image(path, max_pixels=1000, frame=1)
    message = str(caught.value)
    assert message.startswith(str(path)) and "too large" in message and "frame 1" in message, message


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "0", "-5", "0.0000001", "lots"])
def test_a_nonsense_megapixel_limit_falls_back_to_the_default(monkeypatch, value):
    """SEGLENS_MAX_MEGAPIXELS=inf raised OverflowError on every decode; 0 or a negative value refused every image."""
    from app.io.images import DEFAULT_MAX_PIXELS, pixel_limit

    monkeypatch.setenv("SEGLENS_MAX_MEGAPIXELS", value)
    assert pixel_limit() == DEFAULT_MAX_PIXELS


def test_a_sensible_megapixel_limit_is_used(monkeypatch):
    from app.io.images import pixel_limit

    monkeypatch.setenv("SEGLENS_MAX_MEGAPIXELS", "0.5")
    assert pixel_limit() == 500_000
