"""Masks as polygons and back, in continuous image coordinates (a pixel (col, row) covers [col, col+1) × [row, row+1),
its centre at +0.5), the convention of COCO's `bbox` and of pycocotools' rasteriser.

COCO: each outer boundary traced by OpenCV's findContours on the mask doubled in size, so the polygon runs a quarter
pixel inside the mask's edge: every pixel centre of the mask lies inside it and every other pixel centre outside, a
quarter pixel clear — pycocotools' rasteriser (and `fill`) give the mask back exactly. A mask with a hole has no
such polygon list (COCO's polygons of one object are a union): `outer_polygons` says so and the writer uses a
run-length mask. A reference's polygons, whoever wrote them, are filled as pycocotools fills them (`coco_fill`), so
its masks are the ones COCOeval scores against.

YOLO: one polygon per object through the centres of its largest part's boundary pixels (findContours on the mask as
it is, +0.5), its holes joined by seams: Ultralytics' loader scales the normalised points back and fills them with
OpenCV as `fill` does.
"""

from __future__ import annotations

import itertools

import cv2
import numpy as np

from app.inference.model.instances import PixelBox
from app.runs.labels.rle import columns_from_toggles, crop

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
    """One polygon through the boundary pixels' centres of the mask's largest part (by area; None when empty), its
    holes joined to it by a seam from the nearest vertex (as Ultralytics joins a COCO object's parts), so OpenCV's
    fill gives the part back with its holes — kept only when it does, else the part's outline alone."""
    contours, hierarchy = cv2.findContours(mask.astype(np.uint8), cv2.RETR_CCOMP, cv2.CHAIN_APPROX_SIMPLE)
    if not contours:
        return None
    parents = hierarchy[0][:, 3]
    outer = max((i for i in range(len(contours)) if parents[i] < 0),
                key=lambda i: (cv2.contourArea(contours[i]), len(contours[i])))
    outline = contours[outer].reshape(-1, 2)
    holes = [contours[i].reshape(-1, 2) for i in range(len(contours)) if parents[i] == outer]
    joined = _with_holes(outline, holes, _part(mask, outline)) if holes else outline
    return _at_least_three(joined.astype(np.float64) + 0.5 + offset)


def _part(mask: np.ndarray, outline: np.ndarray) -> np.ndarray:
    """The 8-connected part of `mask` the outline bounds."""
    _, labels = cv2.connectedComponents(mask.astype(np.uint8), connectivity=8)
    x, y = (int(v) for v in outline[0])
    part: np.ndarray = labels == labels[y, x]
    return part


def _with_holes(outline: np.ndarray, holes: list[np.ndarray], part: np.ndarray) -> np.ndarray:
    """The outline with each hole spliced in at the nearest pair of vertices (there and back); the outline alone
    when the joined polygon does not fill exactly to `part` (a seam that leaves the part)."""
    joined = outline
    for hole in holes:
        distances = ((joined[:, None, :].astype(np.int64) - hole[None, :, :]) ** 2).sum(axis=2)
        i, j = np.unravel_index(int(distances.argmin()), distances.shape)
        joined = np.concatenate([joined[: i + 1], np.roll(hole, -j, axis=0), hole[j:j + 1], joined[i:]])
    filled = np.zeros(part.shape, dtype=np.uint8)
    cv2.fillPoly(filled, [joined.astype(np.int32)], 1)
    return joined if np.array_equal(filled.astype(bool), part) else outline


def _at_least_three(points: np.ndarray) -> Polygon:
    """A one- or two-point contour (a pixel, a line) repeated to three points: COCO and YOLO need three."""
    while len(points) < 3:
        points = np.concatenate([points, points[-1:]])
    return [round(float(v), 4) for v in points.ravel()]


def coco_fill(polygons: list[Polygon], image_hw: tuple[int, int]) -> np.ndarray:
    """The bool mask [h, w] of COCO polygons as pycocotools rasterises them (`frPyObjects`, then their union), so a
    reference's masks are the masks COCOeval scores against, pixel for pixel, whoever wrote the polygons."""
    out = np.zeros(image_hw, dtype=bool)
    found = coco_fill_cropped(polygons, image_hw)
    if found is not None:
        mask, (x0, y0, x1, y1) = found
        out[y0:y1, x0:x1] = mask
    return out


def coco_fill_cropped(polygons: list[Polygon], image_hw: tuple[int, int]) -> tuple[np.ndarray, PixelBox] | None:
    """`coco_fill` cut to its True pixels' bounds, made only over the columns the polygons reach; None when empty."""
    parts = [part for polygon in polygons
             if (part := _coco_polygon(np.asarray(polygon, dtype=np.float64).reshape(-1, 2), *image_hw)) is not None]
    if not parts:
        return None
    x0, y0 = min(box[0] for _, box in parts), min(box[1] for _, box in parts)
    x1, y1 = max(box[2] for _, box in parts), max(box[3] for _, box in parts)
    union = np.zeros((y1 - y0, x1 - x0), dtype=bool)
    for mask, (px0, py0, px1, py1) in parts:
        union[py0 - y0:py1 - y0, px0 - x0:px1 - x0] |= mask
    return union, (x0, y0, x1, y1)


_SCALE = 5.0  # pycocotools traces a polygon on a grid 5 times finer than the pixels


def _coco_polygon(points: np.ndarray, h: int, w: int) -> tuple[np.ndarray, PixelBox] | None:
    """One polygon, as pycocotools' `rleFrPoly`: the vertices rounded on the fine grid (C's truncation of v + 0.5),
    every edge walked a fine step at a time along its longer axis, and where the walk crosses a pixel column's
    centre the pixels from the crossing's row down (rounded up) toggled; the mask is each pixel's toggles' parity,
    read column by column (made over the crossed columns alone, cut to its bounds)."""
    ends = np.trunc(_SCALE * points + 0.5).astype(np.int64)
    corners = [(int(x), int(y)) for x, y in np.concatenate([ends, ends[:1]]).tolist()]
    walked = [_edge(*start, *end) for start, end in itertools.pairwise(corners)]
    u = np.concatenate([e[0] for e in walked])
    v = np.concatenate([e[1] for e in walked])
    moved = np.flatnonzero(u[1:] != u[:-1]) + 1
    xd = np.where(u[moved] < u[moved - 1], u[moved], u[moved] - 1).astype(np.float64)
    xd = (xd + 0.5) / _SCALE - 0.5
    keep = (np.floor(xd) == xd) & (xd >= 0) & (xd <= w - 1)
    if not keep.any():
        return None
    yd = np.minimum(v[moved], v[moved - 1]).astype(np.float64)
    yd = np.ceil(np.clip((yd + 0.5) / _SCALE - 0.5, 0, h))
    columns = xd[keep].astype(np.int64)
    positions = columns * h + yd[keep].astype(np.int64)
    return columns_from_toggles(positions, h, int(columns.min()), int(columns.max()))


def _edge(xs: int, ys: int, xe: int, ye: int) -> tuple[np.ndarray, np.ndarray]:
    """The fine-grid points of one edge, both ends included, in pycocotools' order and rounding (an edge of one
    point has no slope: C's (int) of NaN, the lowest int, is its row)."""
    dx, dy = abs(xe - xs), abs(ye - ys)
    flip = (dx >= dy and xs > xe) or (dx < dy and ys > ye)
    if flip:
        xs, xe, ys, ye = xe, xs, ye, ys
    steps = np.arange(max(dx, dy) + 1)
    t = max(dx, dy) - steps if flip else steps
    if dx == dy == 0:
        return np.array([xs]), np.array([-(2**31)])
    if dx >= dy:
        return t + xs, np.trunc(ys + (ye - ys) / dx * t + 0.5).astype(np.int64)
    return np.trunc(xs + (xe - xs) / dy * t + 0.5).astype(np.int64), t + ys


def fill(polygons: list[Polygon], image_hw: tuple[int, int]) -> np.ndarray:
    """The bool mask [h, w] of the pixels whose centre lies inside (or on) any of the polygons."""
    out = np.zeros(image_hw, dtype=bool)
    found = fill_cropped(polygons, image_hw)
    if found is not None:
        mask, (x0, y0, x1, y1) = found
        out[y0:y1, x0:x1] = mask
    return out


def fill_cropped(polygons: list[Polygon], image_hw: tuple[int, int]) -> tuple[np.ndarray, PixelBox] | None:
    """`fill` made over the polygons' bounds inside the image alone, cut to its True pixels; None when empty."""
    h, w = image_hw
    shapes = [np.asarray(polygon, dtype=np.float64).reshape(-1, 2) - 0.5 for polygon in polygons]
    every = np.concatenate(shapes)
    x0, y0 = (max(0, int(np.floor(v)) - 1) for v in every.min(axis=0))
    x1, y1 = min(w, int(np.ceil(every[:, 0].max())) + 2), min(h, int(np.ceil(every[:, 1].max())) + 2)
    if x1 <= x0 or y1 <= y0:
        return None
    out = np.zeros((y1 - y0, x1 - x0), dtype=np.uint8)
    shift = 8
    for shape in shapes:
        points = np.round((shape - (x0, y0)) * (1 << shift)).astype(np.int32)
        cv2.fillPoly(out, [points], 1, lineType=cv2.LINE_8, shift=shift)
    found = crop(out.astype(bool))
    if found is None:
        return None
    mask, (bx0, by0, bx1, by1) = found
    return mask, (bx0 + x0, by0 + y0, bx1 + x0, by1 + y0)
