"""Instances as a result: what a detection, instance-segmentation or oriented-box model found in one image — each
object's class, score, box and, where the model gives one, its mask or its rotation — beside or instead of a label
map. Plain records in image pixels, so the decisions, the exports (COCO, YOLO) and the viewer read them alike.

A mask is kept only inside the object's box (`mask_box`, whole pixels), never at the image's size: a hundred
instances of a 4K image would otherwise hold gigabytes of booleans.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

Box = tuple[float, float, float, float]  # x0, y0, x1, y1 in image pixels, x0 <= x1, y0 <= y1
PixelBox = tuple[int, int, int, int]  # x0, y0, x1, y1 whole pixels, end-exclusive


@dataclass(frozen=True)
class Instance:
    """One object. `box` is axis-aligned (for an oriented box: the rotated box's bounds); `angle` is the oriented
    box's rotation in radians (None for an axis-aligned model) with `rotated` its centre, size and angle as the
    model gave them; `mask` a bool array of `mask_box`'s shape (rows, cols), True inside the object. `crowd` marks
    a reference's region of many objects labelled as one (COCO's `iscrowd`): scored as COCOeval scores it."""

    class_index: int
    class_name: str
    score: float
    box: Box
    mask: np.ndarray | None = field(default=None, compare=False, repr=False)
    mask_box: PixelBox | None = None
    angle: float | None = None
    rotated: tuple[float, float, float, float, float] | None = None  # cx, cy, w, h, angle (radians)
    crowd: bool = False

    @property
    def area_px(self) -> int:
        """Pixels of the mask, else of the (oriented) box, rounded."""
        if self.mask is not None:
            return int(np.count_nonzero(self.mask))
        if self.rotated is not None:
            return round(self.rotated[2] * self.rotated[3])
        x0, y0, x1, y1 = self.box
        return round(max(0.0, x1 - x0) * max(0.0, y1 - y0))

    def full_mask(self, image_hw: tuple[int, int]) -> np.ndarray:
        """The mask at the image's size (bool [H, W]); the box filled for a model without masks."""
        h, w = image_hw
        out = np.zeros((h, w), dtype=bool)
        if self.mask is not None and self.mask_box is not None:
            x0, y0, x1, y1 = self.mask_box
            out[y0:y1, x0:x1] = self.mask
            return out
        x0, y0, x1, y1 = (round(v) for v in self.box)
        out[max(0, y0):max(0, y1), max(0, x0):max(0, x1)] = True
        return out


@dataclass(frozen=True)
class Instances:
    """Every object found in one image, best score first, and the image's size they are measured in."""

    items: tuple[Instance, ...]
    image_hw: tuple[int, int]

    def __len__(self) -> int:
        return len(self.items)

    def counts(self) -> dict[str, int]:
        """Objects per class name."""
        found: dict[str, int] = {}
        for item in self.items:
            found[item.class_name] = found.get(item.class_name, 0) + 1
        return found

    def max_scores(self) -> dict[str, float]:
        """The best score per class name."""
        best: dict[str, float] = {}
        for item in self.items:
            best[item.class_name] = max(best.get(item.class_name, 0.0), item.score)
        return best

    def above(self, score: float) -> Instances:
        """The objects scoring at least `score` (a live score threshold: no new run)."""
        return Instances(tuple(i for i in self.items if i.score >= score), self.image_hw)
