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
