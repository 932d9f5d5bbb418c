"""Non-maximum suppression as Ultralytics does it, in numpy: greedy NMS over corner boxes (their TorchNMS.nms,
which matches torchvision's), and for oriented boxes their Fast-NMS with the probabilistic IoU of two Gaussian boxes
(`batch_probiou`): a box goes when any higher-scoring box overlaps it past the limit, kept or not. Class-aware NMS
shifts each class's boxes by the class index times `MAX_WH`, so boxes of two classes never overlap.
"""

from __future__ import annotations

import numpy as np

MAX_WH = 7680  # Ultralytics' class offset (pixels): wider than any working size
MAX_NMS = 30000  # boxes into NMS at most, best first
_EPS = 1e-7


def nms(boxes: np.ndarray, scores: np.ndarray, iou: float, *, limit: int | None = None) -> np.ndarray:
    """Indices of the boxes kept, best score first: each kept box removes the later ones overlapping it by more
    than `iou` (IoU of corner boxes [N, 4]). With `limit` (max_det) it stops once that many are kept — the same
    first ones, without the pass over every candidate a lying head's 30 000 disjoint boxes would cost."""
    x0, y0, x1, y1 = (boxes[:, k] for k in range(4))
    areas = (x1 - x0) * (y1 - y0)
    order = np.argsort(-scores, kind="stable")
    keep: list[int] = []
    while order.size and (limit is None or len(keep) < limit):
        best, rest = int(order[0]), order[1:]
        keep.append(best)
        w = (np.minimum(x1[best], x1[rest]) - np.maximum(x0[best], x0[rest])).clip(min=0)
        h = (np.minimum(y1[best], y1[rest]) - np.maximum(y0[best], y0[rest])).clip(min=0)
        inter = w * h
        if not inter.any():
            order = rest
            continue
        order = rest[inter / (areas[best] + areas[rest] - inter) <= iou]
    return np.asarray(keep, dtype=np.int64)


def fast_nms_rotated(boxes: np.ndarray, scores: np.ndarray, iou: float, *, limit: int | None = None,
                     ) -> np.ndarray:
    """Indices kept of oriented boxes [N, 5] (cx, cy, w, h, angle in radians), best first: a box is dropped when
    any better-scoring box has a probabilistic IoU above `iou` with it (Fast-NMS, TorchNMS.fast_nms). The IoUs
    are taken BLOCK × BLOCK at a time, never the N × N matrix (30 000 candidates: 3.6 GB per step); with `limit`
    (max_det) it stops once that many are kept."""
    order = np.argsort(-scores, kind="stable")
    ranked = boxes[order]
    kept: list[np.ndarray] = []
    found = 0
    for start in range(0, len(ranked), BLOCK):
        suppressed = _suppressed(ranked, start, min(start + BLOCK, len(ranked)), iou)
        kept.append(order[start:start + BLOCK][~suppressed])
        found += int((~suppressed).sum())
        if limit is not None and found >= limit:
            break
    result: np.ndarray = np.concatenate(kept)[:limit] if kept else np.zeros(0, dtype=np.int64)
    return result


BLOCK = 1024  # oriented boxes per side of one block of IoUs


def _suppressed(ranked: np.ndarray, start: int, stop: int, iou: float) -> np.ndarray:
    """Which of the ranked boxes start..stop-1 a better-ranked box overlaps past `iou` (rows taken a block at a
    time, only for the columns not yet decided)."""
    suppressed = np.zeros(stop - start, dtype=bool)
    for first in range(0, stop, BLOCK):
        open_ = np.flatnonzero(~suppressed)
        if not len(open_):
            break
        rows = np.arange(first, min(first + BLOCK, stop))
        over = probiou(ranked[rows], ranked[start + open_]) > iou
        suppressed[open_[(over & (rows[:, None] < start + open_[None, :])).any(0)]] = True
    return suppressed


def probiou(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """The probabilistic IoU [N, M] of oriented boxes (cx, cy, w, h, angle): 1 − the Hellinger distance of their
    Gaussians (Ultralytics' batch_probiou, arXiv 2106.06072)."""
    x1, y1 = first[:, 0:1], first[:, 1:2]
    x2, y2 = second[None, :, 0], second[None, :, 1]
    a1, b1, c1 = _covariance(first)
    a2, b2, c2 = (v.reshape(1, -1) for v in _covariance(second))
    denominator = (a1 + a2) * (b1 + b2) - (c1 + c2) ** 2 + _EPS
    t1 = ((a1 + a2) * (y1 - y2) ** 2 + (b1 + b2) * (x1 - x2) ** 2) / denominator * 0.25
    t2 = ((c1 + c2) * (x2 - x1) * (y1 - y2)) / denominator * 0.5
    spread = 4 * np.sqrt((a1 * b1 - c1**2).clip(min=0) * (a2 * b2 - c2**2).clip(min=0)) + _EPS
    t3 = np.log(((a1 + a2) * (b1 + b2) - (c1 + c2) ** 2) / spread + _EPS) * 0.5
    distance = (t1 + t2 + t3).clip(_EPS, 100.0)
    result: np.ndarray = 1 - np.sqrt(1.0 - np.exp(-distance) + _EPS)
    return result


def _covariance(boxes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The Gaussian of each box [N, 1] ×3: a, b, c of its covariance (the box's uniform variance w²/12, h²/12 turned
    by its angle)."""
    a, b, angle = boxes[:, 2:3] ** 2 / 12, boxes[:, 3:4] ** 2 / 12, boxes[:, 4:5]
    cos, sin = np.cos(angle), np.sin(angle)
    return a * cos**2 + b * sin**2, a * sin**2 + b * cos**2, (a - b) * cos * sin
