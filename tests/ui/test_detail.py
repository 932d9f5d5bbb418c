"""Big images: past the overview copy's resolution the viewer paints full-resolution tiles (pixels and mask),
only where the view is exposed; zoomed out it paints none."""

from __future__ import annotations

import numpy as np
from PIL import Image
from PySide6.QtCore import QRectF
from PySide6.QtGui import QImage, QPainter

TIMEOUT = 20_000


def render(viewer, rect: QRectF, scale: float) -> QImage:
    """The scene's `rect` painted at `scale` screen pixels per image pixel (what a view at that zoom shows)."""
    target = QImage(round(rect.width() * scale), round(rect.height() * scale), QImage.Format.Format_RGB32)
    painter = QPainter(target)
    viewer.scene().render(painter, QRectF(target.rect()), rect)
    painter.end()
    return target


def test_a_big_image_shows_full_resolution_tiles_when_zoomed_in(qtbot, make_main_window, models, tmp_path):
    # 9000 px wide: the overview copy is downscaled (8192); a 1-px checkerboard only survives at full resolution
    image = np.zeros((300, 9000), np.uint8)
    image[::2, ::2] = image[1::2, 1::2] = 255
    image[:, 6000:] = 255  # bright: the binary model's foreground
    path = tmp_path / "wide.png"
    Image.fromarray(image).save(path)
    window = make_main_window(models("binary_logits"))
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.add_paths([path])
    view = window.state.shown
    assert view.display_scale > 1 and view.full_pixels is not None
    detail = window.viewer.detail
    checker = [255 if (x + y) % 2 == 0 else 0 for y in range(4) for x in range(4)]
    window.viewer.set_overlay_visible(False)
    near = render(window.viewer, QRectF(100, 100, 16, 16), 1.0)  # 1:1
    assert detail.painted_tiles == 1
    assert [near.pixelColor(x, y).red() for y in range(4) for x in range(4)] == checker  # the exact pattern
    window.viewer.set_overlay_visible(True)  # the mask at full resolution too: on the white cells only
    near = render(window.viewer, QRectF(100, 100, 16, 16), 1.0)
    blues = [near.pixelColor(x, y).blue() for y in range(4) for x in range(4)]
    assert [b > 100 for b in blues] == [c == 255 for c in checker] and max(blues) < 140  # white under orange
    overlay = render(window.viewer, QRectF(7000, 100, 8, 8), 1.0).pixelColor(2, 2)
    assert overlay.red() > overlay.blue()  # the mask's class colour (orange) blended over white
    render(window.viewer, QRectF(0, 0, 9000, 300), 0.1)  # zoomed out: the overview copy alone
    assert detail.painted_tiles == 0
    window.presenter.set_split("raw")  # an overlay the tiles do not draw: the overview path only
    assert not detail.active
