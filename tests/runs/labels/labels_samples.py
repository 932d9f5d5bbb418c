"""Synthetic instance sets for the labels tests: a few images of other sizes, three classes, masks with and
without holes, boxes, oriented boxes, and a model's answer that overlaps, misses and invents against them."""

from __future__ import annotations

import cv2
import numpy as np

from app.inference.model.instances import Instance, Instances
from app.runs.labels.records import LabelledImage, LabelSet

NAMES = ("pit", "scratch", "stain")


def masked(class_index: int, score: float, full: np.ndarray, *, crowd: bool = False) -> Instance:
    """An instance whose mask is `full` (bool [h, w]), kept in a box one pixel wider than its pixels."""
    ys, xs = np.nonzero(full)
    h, w = full.shape
    x0, y0 = max(0, int(xs.min()) - 1), max(0, int(ys.min()) - 1)
    x1, y1 = min(w, int(xs.max()) + 2), min(h, int(ys.max()) + 2)
    box = (float(xs.min()), float(ys.min()), float(xs.max() + 1), float(ys.max() + 1))
    return Instance(class_index, NAMES[class_index], score, box, mask=full[y0:y1, x0:x1].copy(),
                    mask_box=(x0, y0, x1, y1), crowd=crowd)


def disc(hw: tuple[int, int], centre: tuple[int, int], radius: int, *, hole: int = 0) -> np.ndarray:
    out = np.zeros(hw, dtype=np.uint8)
    cv2.circle(out, centre, radius, 1, -1)
    if hole:
        cv2.circle(out, centre, hole, 0, -1)
    return out.astype(bool)


def blob(hw: tuple[int, int], seed: int, box: tuple[int, int, int, int]) -> np.ndarray:
    """An irregular shape inside box (x0, y0, x1, y1): smoothed noise, thresholded, its largest part, no hole."""
    rng = np.random.default_rng(seed)
    x0, y0, x1, y1 = box
    field = cv2.GaussianBlur(rng.random((y1 - y0, x1 - x0)), (0, 0), 2.0)
    part = (field > np.quantile(field, 0.45)).astype(np.uint8)
    count, labels, stats, _ = cv2.connectedComponentsWithStats(part, connectivity=4)
    largest = 1 + int(np.argmax(stats[1:, cv2.CC_STAT_AREA])) if count > 1 else 0
    contours, _ = cv2.findContours((labels == largest).astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_NONE)
    out = np.zeros(hw, dtype=np.uint8)
    cv2.drawContours(out, contours, -1, 1, -1, offset=(x0, y0))
    return out.astype(bool)


def boxed(class_index: int, score: float, box: tuple[float, float, float, float], *, crowd: bool = False) -> Instance:
    return Instance(class_index, NAMES[class_index], score, box, crowd=crowd)


def oriented(class_index: int, score: float, rotated: tuple[float, float, float, float, float]) -> Instance:
    cx, cy, w, h, angle = rotated
    c, s = abs(np.cos(angle)), abs(np.sin(angle))
    half_w, half_h = (w * c + h * s) / 2, (w * s + h * c) / 2
    box = (cx - half_w, cy - half_h, cx + half_w, cy + half_h)
    return Instance(class_index, NAMES[class_index], score, box, angle=angle, rotated=rotated)


def masks_set() -> LabelSet:
    """Three images of other sizes with masked instances (one ring with a hole, one in two parts)."""
    a_hw, b_hw, c_hw = (60, 80), (48, 40), (33, 71)
    two_parts = disc(c_hw, (10, 10), 5) | disc(c_hw, (30, 20), 4)
    return LabelSet(NAMES, (
        LabelledImage("a.png", Instances((masked(0, 0.9, disc(a_hw, (20, 20), 8)),
                                          masked(1, 0.8, blob(a_hw, 1, (40, 10, 75, 50))),
                                          masked(2, 0.7, disc(a_hw, (25, 45), 10, hole=4))), a_hw)),
        LabelledImage("sub/b.jpg", Instances((masked(1, 0.95, blob(b_hw, 2, (2, 3, 30, 40))),), b_hw)),
        LabelledImage("sub/deeper/c.png", Instances((masked(0, 0.6, two_parts),
                                                     masked(2, 0.5, blob(c_hw, 3, (40, 2, 70, 30)))), c_hw)),
        LabelledImage("empty.png", Instances((), (20, 30))),
    ))


def boxes_set() -> LabelSet:
    return LabelSet(NAMES, (
        LabelledImage("a.png", Instances((boxed(0, 0.9, (3.25, 4.5, 20.75, 30.0)),
                                          boxed(2, 0.4, (50.0, 10.0, 79.5, 59.0))), (60, 80))),
        LabelledImage("b.png", Instances((boxed(1, 0.7, (0.0, 0.0, 40.0, 48.0)),), (48, 40))),
    ))


def obb_set() -> LabelSet:
    return LabelSet(NAMES, (
        LabelledImage("a.png", Instances((oriented(0, 0.9, (40.0, 30.0, 30.0, 10.0, 0.5)),
                                          oriented(1, 0.8, (20.0, 20.0, 12.0, 6.0, -0.3))), (60, 80))),
    ))


def same_instances(got: Instances, want: Instances, *, scores: bool = True, boxes: bool = True,
                   tolerance: float = 1e-9) -> None:
    """Assert two images' instances are the same, in order: class, score, box, full mask, oriented box."""
    assert got.image_hw == want.image_hw
    assert len(got) == len(want), (len(got), len(want))
    for g, w in zip(got.items, want.items, strict=True):
        assert (g.class_index, g.class_name, g.crowd) == (w.class_index, w.class_name, w.crowd)
        if scores:
            assert g.score == w.score
        if boxes:
            assert np.allclose(g.box, w.box, atol=tolerance, rtol=0), (g.box, w.box)
        assert (g.mask is None) == (w.mask is None)
        if w.mask is not None:
            assert np.array_equal(g.full_mask(got.image_hw), w.full_mask(want.image_hw))
        assert (g.rotated is None) == (w.rotated is None)
        if w.rotated is not None and g.rotated is not None:
            assert np.allclose(g.rotated, w.rotated, atol=tolerance, rtol=0), (g.rotated, w.rotated)
