"""Correcting a mask by hand, as plain numpy (no Qt): brush and eraser strokes, flood fill, a prompt model's
proposal painted in (paint_mask), undo and redo.

A stroke paints round brush segments into the label mask (a disc stamped at every pixel step) and reports the
rectangle it changed, so the window copies only that into its overlay image. Undo keeps
*deltas*, not masks: when a stroke ends, the pixels it changed are stored as their flat indices with the labels
before and after (6 bytes a pixel), so 50 long strokes on a 1080p mask cost a few MB, not 50 × 2 MB. A stroke that
changed nothing leaves no step. At most `max_steps` steps are kept (the oldest go first).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np

Box = tuple[int, int, int, int]  # x0, y0, x1, y1: columns x0..x1-1, rows y0..y1-1
Rect = tuple[float, float, float, float] | Any  # a box's edges x0, y0, x1, y1, or a record with those fields


@dataclass(frozen=True)
class Step:
    """One undoable change: where, and the labels before and after at those pixels."""

    indices: np.ndarray  # int32 flat indices into the mask
    before: np.ndarray  # uint8
    after: np.ndarray  # uint8
    box: Box

    @property
    def nbytes(self) -> int:
        return self.indices.nbytes + self.before.nbytes + self.after.nbytes


class MaskEdit:
    """An editable copy of a label mask."""

    def __init__(self, mask: np.ndarray, *, max_steps: int = 100) -> None:
        self.mask = np.array(mask, dtype=np.uint8, copy=True, order="C")
        self.max_steps = max_steps
        self._undo: list[Step] = []
        self._redo: list[Step] = []
        self._before: np.ndarray | None = None  # the mask when the stroke began (only inside a stroke)
        self._box: Box | None = None  # the stroke's changed area so far
        self._stroke: tuple[int, int] | None = None  # label, radius
        self.changed = False  # any step since the start or the last save

    # -- strokes ---------------------------------------------------------------------------------------

    def begin_stroke(self, label: int, radius: int) -> None:
        self._before = self.mask.copy()  # ~0.2 ms for 1080p; the step keeps only what changed
        self._box = None
        self._stroke = (int(label), max(1, int(radius)))

    def segment(self, start: tuple[float, float], end: tuple[float, float]) -> Box | None:
        """Paint the brush from `start` to `end` (image x, y): a disc of the brush's radius (pixels whose centre is
        within it: x² + y² ≤ r²) stamped at every pixel step along the way. The rectangle changed (None: outside)."""
        if self._stroke is None:
            raise RuntimeError("segment() outside a stroke")
        label, radius = self._stroke
        (ax, ay), (bx, by) = (round(start[0]), round(start[1])), (round(end[0]), round(end[1]))
        steps = max(abs(bx - ax), abs(by - ay)) + 1
        xs = np.rint(np.linspace(ax, bx, steps)).astype(int)
        ys = np.rint(np.linspace(ay, by, steps)).astype(int)
        box = self._clip((int(xs.min()) - radius, int(ys.min()) - radius,
                          int(xs.max()) + radius + 1, int(ys.max()) + radius + 1))
        if box is None:
            return None
        x0, y0, x1, y1 = box
        painted = np.zeros((y1 - y0, x1 - x0), bool)
        disc = _disc(radius)
        for x, y in zip(xs, ys, strict=True):  # the disc's window clipped to the box
            left, top = x - radius - x0, y - radius - y0
            r0, c0 = max(0, top), max(0, left)
            r1, c1 = min(painted.shape[0], top + disc.shape[0]), min(painted.shape[1], left + disc.shape[1])
            if r0 < r1 and c0 < c1:
                painted[r0:r1, c0:c1] |= disc[r0 - top : r1 - top, c0 - left : c1 - left]
        self.mask[y0:y1, x0:x1][painted] = label
        self._box = box if self._box is None else _union(self._box, box)
        return box

    def end_stroke(self) -> Box | None:
        """Finish the stroke: one undo step with what it changed (none when nothing did); its rectangle."""
        before, box = self._before, self._box
        self._before, self._box, self._stroke = None, None, None
        if before is None or box is None:
            return None
        return self._record(before[box[1] : box[3], box[0] : box[2]], box)

    def fill(self, point: tuple[float, float], label: int) -> Box | None:
        """Flood fill the 4-connected region of equal labels under `point` with `label`; one undo step."""
        x, y = round(point[0]), round(point[1])
        height, width = self.mask.shape
        if not (0 <= x < width and 0 <= y < height) or self.mask[y, x] == label:
            return None
        before = self.mask.copy()
        flood = np.zeros((height + 2, width + 2), np.uint8)
        _, _, _, rect = cv2.floodFill(self.mask, flood, (x, y), int(label), 0, 0, 4)
        rx, ry, rw, rh = rect
        return self._record(before[ry : ry + rh, rx : rx + rw], (rx, ry, rx + rw, ry + rh))

    def paint_mask(self, mask: np.ndarray, label: int, *, replace_in: Rect | None = None) -> Box | None:
        """A proposal accepted as one undo step: the pixels of `mask` (bool, the mask's size) become `label`; with
        `replace_in` (x0, y0, x1, y1: a box, or a Box record with those fields) the pixels of `label` inside it that
        are not in `mask` become 0 first ("replace that class inside the box"). The rectangle changed (None:
        nothing changed, no step)."""
        mask = np.asarray(mask, bool)
        if mask.shape != self.mask.shape:
            raise ValueError(f"a {mask.shape[1]}×{mask.shape[0]} proposal for a "
                             f"{self.mask.shape[1]}×{self.mask.shape[0]} mask")
        rows, cols = np.nonzero(mask.any(axis=1))[0], np.nonzero(mask.any(axis=0))[0]
        area = (int(cols[0]), int(rows[0]), int(cols[-1]) + 1, int(rows[-1]) + 1) if rows.size else None
        inside = self._rect(replace_in) if replace_in is not None else None
        box = area if inside is None else inside if area is None else _union(area, inside)
        if box is None:
            return None
        x0, y0, x1, y1 = box
        window = self.mask[y0:y1, x0:x1]
        before = window.copy()
        if inside is not None:  # only inside the box: the class elsewhere stays
            ix0, iy0, ix1, iy1 = inside
            part = window[iy0 - y0 : iy1 - y0, ix0 - x0 : ix1 - x0]
            part[(part == label) & ~mask[iy0:iy1, ix0:ix1]] = 0
        window[mask[y0:y1, x0:x1]] = label
        changed = self._record(before, box)
        return None if changed is None else self._changed_box(before, box)

    # -- undo / redo -----------------------------------------------------------------------------------

    def undo(self) -> Box | None:
        return self._replay(self._undo, self._redo, after=False)

    def redo(self) -> Box | None:
        return self._replay(self._redo, self._undo, after=True)

    def _replay(self, source: list[Step], target: list[Step], *, after: bool) -> Box | None:
        """Move the newest step of `source` to `target`, putting back its labels after (redo) or before (undo)."""
        if not source:
            return None
        step = source.pop()
        self.mask.reshape(-1)[step.indices] = step.after if after else step.before
        target.append(step)
        self.changed = True
        return step.box

    @property
    def can_undo(self) -> bool:
        return bool(self._undo)

    @property
    def can_redo(self) -> bool:
        return bool(self._redo)

    @property
    def undo_bytes(self) -> int:
        """Memory held by the undo and redo steps."""
        return sum(step.nbytes for step in (*self._undo, *self._redo))

    # -- inside ----------------------------------------------------------------------------------------

    def _record(self, window_before: np.ndarray, box: Box) -> Box | None:
        """One step from the labels `window_before` had inside `box` (before the change) to the mask's now."""
        x0, y0, x1, y1 = box
        window_after = self.mask[y0:y1, x0:x1]
        rows, cols = np.nonzero(window_before != window_after)
        if rows.size == 0:
            return None
        indices = ((rows + y0) * self.mask.shape[1] + (cols + x0)).astype(np.int32)
        self._undo.append(Step(indices, window_before[rows, cols].copy(), window_after[rows, cols].copy(), box))
        del self._undo[: max(0, len(self._undo) - self.max_steps)]
        self._redo.clear()
        self.changed = True
        return box

    def _changed_box(self, window_before: np.ndarray, box: Box) -> Box:
        rows, cols = np.nonzero(window_before != self.mask[box[1] : box[3], box[0] : box[2]])
        return (box[0] + int(cols.min()), box[1] + int(rows.min()), box[0] + int(cols.max()) + 1,
                box[1] + int(rows.max()) + 1)

    def _rect(self, rect: Rect) -> Box | None:
        """A box in image pixels (edges may be fractional) → the whole pixels it covers, clipped to the mask."""
        x0, y0, x1, y1 = (rect.x0, rect.y0, rect.x1, rect.y1) if not isinstance(rect, tuple) else rect
        return self._clip((math.floor(x0), math.floor(y0), math.ceil(x1), math.ceil(y1)))

    def _clip(self, box: Box) -> Box | None:
        height, width = self.mask.shape
        x0, y0, x1, y1 = max(0, box[0]), max(0, box[1]), min(width, box[2]), min(height, box[3])
        return (x0, y0, x1, y1) if x0 < x1 and y0 < y1 else None


def _disc(radius: int) -> np.ndarray:
    """Boolean (2r+1)² disc: pixels whose centre lies within `radius` of the middle one."""
    offsets = np.arange(-radius, radius + 1)
    return offsets[None, :] ** 2 + offsets[:, None] ** 2 <= radius * radius


def _union(a: Box, b: Box) -> Box:
    return min(a[0], b[0]), min(a[1], b[1]), max(a[2], b[2]), max(a[3], b[3])
