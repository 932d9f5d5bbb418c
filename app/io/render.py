"""Qt-free pictures of results: class colours blended over the image (the CLI's `_overlay.png`).

The viewer paints its overlay from the same colour table (`class_colors`), so a class has one colour
everywhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import cv2
import numpy as np

# Distinct, colour-blind-aware colours (Okabe-Ito first, then Tableau) for classes without one.
PALETTE: tuple[tuple[int, int, int], ...] = (
    (230, 159, 0), (86, 180, 233), (0, 158, 115), (240, 228, 66), (0, 114, 178), (213, 94, 0),
    (204, 121, 167), (255, 59, 48), (148, 103, 189), (140, 86, 75), (23, 190, 207), (188, 189, 34),
)


class Colored(Protocol):
    """What painting needs of a class (app.inference.spec.ClassInfo): its colour, None = not painted."""

    color: tuple[int, int, int] | None


def class_colors(classes: Sequence[Colored]) -> tuple[np.ndarray, np.ndarray]:
    """(256×3 uint8 RGB colours, 256 bool painted) for every label value; labels past the list cycle the
    palette so an unexpected label is still visible."""
    colors = np.zeros((256, 3), np.uint8)
    painted = np.zeros(256, bool)
    for label in range(1, 256):
        colors[label] = PALETTE[(label - 1) % len(PALETTE)]
        painted[label] = True
    for label, info in enumerate(classes[:256]):
        painted[label] = info.color is not None
        if info.color is not None:
            colors[label] = info.color
    return colors, painted


def blend_overlay(
    image: np.ndarray,
    mask: np.ndarray,
    classes: Sequence[Colored],
    *,
    alpha: float = 0.5,
    contour: bool = False,
) -> np.ndarray:
    """RGB uint8 image with each painted class blended in its colour (filled, or 2-px outlines)."""
    rgb = cv2.cvtColor(image, cv2.COLOR_GRAY2RGB) if image.ndim == 2 else image
    colors, painted = class_colors(classes)
    # lookup tables instead of fancy indexing: a 1080p overlay in ~10 ms instead of ~80 ms
    paint = cv2.LUT(mask, painted.astype(np.uint8) * np.uint8(255))
    if contour:
        paint = cv2.bitwise_and(paint, cv2.compare(cv2.dilate(mask, _KERNEL), cv2.erode(mask, _KERNEL), cv2.CMP_NE))
    color_image = cv2.LUT(cv2.merge([mask, mask, mask]), colors.reshape(256, 1, 3))
    blended = cv2.addWeighted(rgb, 1.0 - alpha, color_image, alpha, 0.0)
    out = rgb.copy()
    cv2.copyTo(blended, paint, out)
    return out


_KERNEL = np.ones((3, 3), np.uint8)  # outlines: pixels whose 3×3 neighbourhood holds another label (2 px wide)
