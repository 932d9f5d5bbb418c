"""The CLI's overlay picture: class colours blended at the given opacity, filled or as outlines."""

from __future__ import annotations

import numpy as np

from app.inference.model.spec import ClassInfo
from app.io.render import blend_overlay

CLASSES = (ClassInfo("background", None), ClassInfo("scratch", (255, 0, 0)), ClassInfo("hidden", None),
           ClassInfo("pit", (0, 0, 200)))


def scene():
    image = np.full((30, 40, 3), 100, np.uint8)
    image[:, :, 1] = 60
    mask = np.zeros((30, 40), np.uint8)
    mask[5:15, 5:15] = 1
    mask[20:28, 20:30] = 3
    mask[0:3, 30:40] = 2  # a class without colour: never painted
    return image, mask


def test_filled_overlay_blends_each_class_colour_at_alpha():
    image, mask = scene()
    out = blend_overlay(image, mask, CLASSES, alpha=0.25)
    assert out.shape == image.shape and out.dtype == np.uint8
    np.testing.assert_array_equal(out[mask == 0], image[mask == 0])
    np.testing.assert_array_equal(out[mask == 2], image[mask == 2])
    np.testing.assert_allclose(out[mask == 1], np.round(0.75 * image[mask == 1] + 0.25 * np.array([255, 0, 0])), atol=1)
    np.testing.assert_allclose(out[mask == 3], np.round(0.75 * image[mask == 3] + 0.25 * np.array([0, 0, 200])), atol=1)


def test_contour_overlay_paints_only_region_borders():
    image, mask = scene()
    out = blend_overlay(image, mask, CLASSES, alpha=0.5, contour=True)
    assert (out[9, 9] == image[9, 9]).all()  # inside the scratch square
    assert (out[5, 9] != image[5, 9]).any() and (out[14, 9] != image[14, 9]).any()  # its top and bottom rows
    assert (out[4, 9] == image[4, 9]).all()  # background next to it stays unpainted
    assert (out[20, 25] != image[20, 25]).any()


def test_gray_image_becomes_rgb():
    image, mask = scene()
    gray = image[:, :, 0].copy()
    out = blend_overlay(gray, mask, CLASSES)
    assert out.shape == (30, 40, 3)
    assert (out[0, 0] == gray[0, 0]).all() and out[9, 9, 0] > out[9, 9, 1]
