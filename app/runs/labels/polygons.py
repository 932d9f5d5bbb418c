"""Masks as polygons and back, in continuous image coordinates (a pixel (col, row) covers [col, col+1) × [row, row+1),
its centre at +0.5), the convention of COCO's `bbox` and of pycocotools' rasteriser.

COCO: each outer boundary traced by OpenCV's findContours on the mask doubled in size, so the polygon runs a quarter
pixel inside the mask's edge: every pixel centre of the mask lies inside it and every other pixel centre outside, a
quarter pixel clear — pycocotools' rasteriser (and `fill`) give the mask back exactly. A mask with a hole has no
such polygon list (COCO's polygons of one object are a union): `outer_polygons` says so and the writer uses a
run-length mask.

YOLO: one polygon per object through the centres of its largest part's boundary pixels (findContours on the mask as
it is, +0.5): Ultralytics' loader scales the normalised points back and fills them with OpenCV as `fill` does.
"""

from __future__ import annotations

import cv2
import numpy as np

Polygon = list[float]  # x0, y0, x1, y1, … in image pixels (continuous coordinates)


def outer_polygons(mask: np.ndarray, *, offset: tuple[int, int] = (0, 0)) -> list[Polygon] | None:
    """The polygons whose union is exactly `mask` (bool [h, w], placed at `offset` (x, y) in the image), one per
    connected part; None when the mask has a hole (or is empty)."""
    doubled = np.repeat(np.repeat(mask.astype(np.uint8), 2, axis=0), 2, axis=1)
    contours, hierarchy = cv2.findContours(doubled, cv2.RETR_CCOMP, cv2.CHAIN_APPROX_SIMPLE)
    if not contours or (hierarchy[0][:, 3] >= 0).any():  # a contour with a parent: a hole
        return None
    dx, dy = offset
    polygons = []
    for contour in contours:
        points = contour.reshape(-1, 2).astype(np.float64)
        points = (points + 0.5) / 2.0 + (dx, dy)
        polygons.append(_at_least_three(points))
    return polygons


def centre_polygon(mask: np.ndarray, *, offset: tuple[int, int] = (0, 0)) -> Polygon | None:
    """One polygon through the boundary pixels' centres of the mask's largest part (most pixels); None when empty."""
    contours, _ = cv2.findContours(mask.astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
    if not contours:
        return None
    largest = max(contours, key=lambda c: (cv2.contourArea(c), len(c)))
    points = largest.reshape(-1, 2).astype(np.float64) + 0.5 + offset
    return _at_least_three(points)


def _at_least_three(points: np.ndarray) -> Polygon:
    """A one- or two-point contour (a pixel, a line) repeated to three points: COCO and YOLO need three."""
    while len(points) < 3:
        points = np.concatenate([points, points[-1:]])
    return [round(float(v), 4) for v in points.ravel()]


def fill(polygons: list[Polygon], image_hw: tuple[int, int]) -> np.ndarray:
    """The bool mask [h, w] of the pixels whose centre lies inside (or on) any of the polygons."""
    h, w = image_hw
    out = np.zeros((h, w), dtype=np.uint8)
    shift = 8
    for polygon in polygons:
        points = (np.asarray(polygon, dtype=np.float64).reshape(-1, 2) - 0.5) * (1 << shift)
        cv2.fillPoly(out, [np.round(points).astype(np.int32)], 1, lineType=cv2.LINE_8, shift=shift)
    return out.astype(bool)
