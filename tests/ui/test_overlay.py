"""overlay.py's claim, checked: a mask is copied into Qt's memory once per mode; a class toggle rewrites only the
kept image's colour table (same QImage, same pixel buffer)."""

from __future__ import annotations

import numpy as np
from PySide6.QtGui import QImage, qAlpha

from app.inference.model.spec import ClassInfo
from app.ui.widgets.overlay import OverlayImage
from app.ui.widgets.viewer import ImageViewer

CLASSES = [ClassInfo("background", None), ClassInfo("a", (255, 0, 0)), ClassInfo("b", (0, 0, 255))]


def buffer_address(image: QImage) -> int:
    return np.frombuffer(image.constBits(), np.uint8).ctypes.data  # constBits: reading never detaches


def mask() -> np.ndarray:
    labels = np.zeros((40, 60), np.uint8)
    labels[5:20, 5:30] = 1
    labels[22:35, 30:55] = 2
    return labels


def test_class_toggles_keep_the_image_and_its_pixels_and_change_only_the_colour_table(qtbot):
    viewer = ImageViewer()
    qtbot.addWidget(viewer)
    overlay = OverlayImage(mask(), CLASSES)
    filled = overlay.image()
    address = buffer_address(filled)
    viewer.set_overlay(filled)  # the pixmap made from it must not share (and so force a copy of) its pixels
    assert filled.format() == QImage.Format.Format_Indexed8 and qAlpha(filled.color(1)) == 255
    hidden = overlay.image(hidden={1})
    assert hidden is filled and buffer_address(hidden) == address
    assert qAlpha(hidden.color(1)) == 0 and qAlpha(hidden.color(2)) == 255 and qAlpha(hidden.color(0)) == 0
    assert overlay.image(hidden=set()) is filled and qAlpha(filled.color(1)) == 255


def test_the_contour_image_is_made_once_and_kept_beside_the_filled_one(qapp):
    overlay = OverlayImage(mask(), CLASSES)
    filled = overlay.image()
    contour = overlay.image(contour=True)
    address = buffer_address(contour)
    assert contour is not filled and overlay.image(contour=True, hidden={2}) is contour
    assert buffer_address(contour) == address and overlay.image() is filled
    pixels = np.frombuffer(contour.constBits(), np.uint8).reshape(40, contour.bytesPerLine())[:, :60]
    assert pixels[10, 15] == 0 and pixels[5, 15] == 1  # inside plain, the border labelled
