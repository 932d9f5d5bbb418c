"""Pictures of an instance result (a detection, instance-segmentation or oriented-box model): the `_overlay.png`
with each object filled in its class colour at the overlay opacity, outlined in that colour and labelled with its
class and score, and the `_mask.png` as a label image.

The label image holds class index + 1 per pixel (0: no object); where objects overlap, the better-scoring one is
painted last and so wins the pixel. An object is its mask where the model gives one, else its box (detect), else
its rotated box (obb). A model of 255 classes or more gets a 16-bit PNG, so no class index wraps.

Only the pixels inside each object's box are touched: a hundred objects on a large image stay cheap.
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from app.inference.model.instances import Instance, Instances
from app.io.render import PALETTE, Colored

OPACITY = 0.5  # as the semantic overlay's (app.io.render.blend_overlay)
OUTLINE_PX = 2


def instance_labels(instances: Instances, *, classes: int) -> np.ndarray:
    """The label image at the image's size: class index + 1 where an object is, 0 elsewhere, better scores on
    top; uint8, or uint16 for `classes` ≥ 255."""
    h, w = instances.image_hw
    labels = np.zeros((h, w), np.uint16 if classes >= 255 else np.uint8)
    for item in reversed(instances.items):  # best first: painted worst to best, so the best wins an overlap
        region = _region(item, instances.image_hw)
        if region is not None:
            (x0, y0, x1, y1), inside = region
            labels[y0:y1, x0:x1][inside] = item.class_index + 1
    return labels


def instance_overlay(image: np.ndarray, instances: Instances, classes: Sequence[Colored], *,
                     alpha: float = OPACITY) -> np.ndarray:
    """RGB uint8: `image` with every object filled in its class colour at `alpha`, outlined in it and labelled
    `<class> <score>`; the best object drawn last (on top)."""
    out = cv2.cvtColor(image, cv2.COLOR_GRAY2RGB) if image.ndim == 2 else image.copy()
    if out.dtype != np.uint8:
        out = np.clip(out, 0, 255).astype(np.uint8)
    for item in reversed(instances.items):
        color = class_color(classes, item.class_index)
        region = _region(item, instances.image_hw)
        if region is not None:
            _fill(out, region, color, alpha)
        _outline(out, item, region, color)
    for item in reversed(instances.items):  # labels over every outline, never hidden under a later fill
        _label(out, item, class_color(classes, item.class_index))
    return out


def class_color(classes: Sequence[Colored], index: int) -> tuple[int, int, int]:
    """An object's colour: its class's (the spec's), else the palette's for that class index."""
    color = classes[index].color if 0 <= index < len(classes) else None
    return color if color is not None else PALETTE[index % len(PALETTE)]


def _region(item: Instance, image_hw: tuple[int, int]) -> tuple[tuple[int, int, int, int], np.ndarray] | None:
    """(pixel box inside the image, bool mask of that box) of the object, None when it covers no pixel."""
    h, w = image_hw
    if item.mask is not None and item.mask_box is not None:
        x0, y0, x1, y1 = item.mask_box
        cx0, cy0, cx1, cy1 = max(0, x0), max(0, y0), min(w, x1), min(h, y1)
        if cx0 >= cx1 or cy0 >= cy1:
            return None
        return (cx0, cy0, cx1, cy1), item.mask[cy0 - y0:cy1 - y0, cx0 - x0:cx1 - x0].astype(bool)
    bx0, by0, bx1, by1 = _pixel_bounds(item.box, image_hw)
    if bx0 >= bx1 or by0 >= by1:
        return None
    inside = np.zeros((by1 - by0, bx1 - bx0), np.uint8)
    if item.rotated is not None:
        points = _corners(item) - np.array([bx0, by0], np.float64)
        cv2.fillPoly(inside, [np.round(points).astype(np.int32)], 1)
    else:
        inside[:] = 1
    return (bx0, by0, bx1, by1), inside.astype(bool)


def _pixel_bounds(box: tuple[float, float, float, float], image_hw: tuple[int, int]) -> tuple[int, int, int, int]:
    h, w = image_hw
    x0, y0, x1, y1 = (round(v) for v in box)
    return max(0, x0), max(0, y0), min(w, x1), min(h, y1)


def _corners(item: Instance) -> np.ndarray:
    """The oriented box's four corners (x, y), float [4, 2]."""
    assert item.rotated is not None
    cx, cy, w, h, angle = item.rotated
    return np.asarray(cv2.boxPoints(((cx, cy), (w, h), float(np.degrees(angle)))), np.float64)


def _fill(out: np.ndarray, region: tuple[tuple[int, int, int, int], np.ndarray], color: tuple[int, int, int],
          alpha: float) -> None:
    """The object's pixels blended with its colour (OpenCV's blend and masked copy: a boolean gather and scatter in
    numpy cost twice as much on a picture of hundreds of objects)."""
    (x0, y0, x1, y1), inside = region
    patch = out[y0:y1, x0:x1]
    solid = np.empty_like(patch)
    solid[:] = color
    blended = cv2.addWeighted(patch, 1.0 - alpha, solid, alpha, 0.0)
    patch[:] = cv2.copyTo(blended, np.ascontiguousarray(inside).view(np.uint8), patch.copy())


def _outline(out: np.ndarray, item: Instance, region: tuple[tuple[int, int, int, int], np.ndarray] | None,
             color: tuple[int, int, int]) -> None:
    """The mask's boundary, else the (rotated) box's, OUTLINE_PX wide."""
    if item.mask is not None and region is not None:
        (x0, y0, _, _), inside = region
        contours, _ = cv2.findContours(inside.astype(np.uint8), cv2.RETR_LIST, cv2.CHAIN_APPROX_SIMPLE)
        cv2.drawContours(out, contours, -1, color, OUTLINE_PX, offset=(x0, y0))
    elif item.rotated is not None:
        cv2.polylines(out, [np.round(_corners(item)).astype(np.int32)], True, color, OUTLINE_PX)
    elif region is not None:
        x0, y0, x1, y1 = region[0]
        cv2.rectangle(out, (x0, y0), (x1 - 1, y1 - 1), color, OUTLINE_PX)


def _label(out: np.ndarray, item: Instance, color: tuple[int, int, int]) -> None:
    """`<class> 0.87` just above the object's box (below its top edge where the image ends), in its colour on a
    black plate."""
    text = f"{item.class_name} {item.score:.2f}"
    h, w = out.shape[:2]
    scale = max(0.4, min(1.0, min(h, w) / 800))
    (tw, th), base = cv2.getTextSize(text, cv2.FONT_HERSHEY_SIMPLEX, scale, 1)
    x = int(min(max(0, round(item.box[0])), max(0, w - tw - 2)))
    top = round(item.box[1]) - th - base - 2
    top = int(top if top >= 0 else min(max(0, h - th - base - 2), max(0, round(item.box[1])) + OUTLINE_PX))
    cv2.rectangle(out, (x, top), (x + tw + 1, top + th + base + 1), (0, 0, 0), cv2.FILLED)
    cv2.putText(out, text, (x + 1, top + th + 1), cv2.FONT_HERSHEY_SIMPLEX, scale, color, 1, cv2.LINE_AA)
