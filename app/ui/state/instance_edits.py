"""The instances the reader sees and corrects, as plain records: per picture, the model's instances and, once the
reader deleted, added or redrew one, the corrected list that replaces them. The live score threshold hides the
model's weaker instances without a new run; an instance the reader drew scores 1.0 and is never hidden by it.

What the viewer exports as training labels (COCO, YOLO) is read from here: every picture looked at, corrected where
the reader corrected it, at the threshold in force, the pictures marked "result wrong" left out. No Qt.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy comes with the first instance result, not with the window (tests/ui/test_startup_imports.py)
    import numpy as np

    from app.inference.model.instances import Box, Instance, Instances
    from app.ui.state.messages import ViewKey

DRAWN_SCORE = 1.0  # an instance the reader drew or redrew: certain, whatever the threshold


@dataclass(frozen=True)
class Correction:
    """A picture's instances as the reader left them (the model's, less those deleted, with those drawn)."""

    items: tuple[Instance, ...]
    image_hw: tuple[int, int]


def above(items: Iterable[Instance], threshold: float | None) -> tuple[Instance, ...]:
    """The instances scoring at least `threshold` (None: all)."""
    return tuple(items) if threshold is None else tuple(i for i in items if i.score >= threshold)


def drawn_instance(class_index: int, class_name: str, box: Box, image_hw: tuple[int, int], *,
                   with_mask: bool) -> Instance | None:
    """An instance the reader drew as a box: whole pixels inside the image, its mask the box filled when the model
    gives masks (a segment model's labels are polygons); None for a box less than a pixel across."""
    import numpy as np

    from app.inference.model.instances import Instance

    h, w = image_hw
    x0, x1 = sorted((min(max(0, round(box[0])), w), min(max(0, round(box[2])), w)))
    y0, y1 = sorted((min(max(0, round(box[1])), h), min(max(0, round(box[3])), h)))
    if x1 - x0 < 1 or y1 - y0 < 1:
        return None
    mask = np.ones((y1 - y0, x1 - x0), bool) if with_mask else None
    return Instance(class_index, class_name, DRAWN_SCORE, (float(x0), float(y0), float(x1), float(y1)), mask,
                    (x0, y0, x1, y1) if with_mask else None)


def painted_instance(class_index: int, class_name: str, stroke: Sequence[tuple[float, float]], radius: int,
                     image_hw: tuple[int, int], *, with_mask: bool) -> Instance | None:
    """An instance the reader painted: the brush of `radius` pixels along `stroke` (image pixels), kept as a mask
    inside its box (the box alone for a model without masks); None when nothing of it lies in the image."""
    import cv2
    import numpy as np

    from app.inference.model.instances import Instance

    h, w = image_hw
    points = np.round(np.asarray(stroke, np.float64)).astype(np.int64).reshape(-1, 2)
    x0, y0 = (max(0, int(v) - radius) for v in points.min(axis=0))
    x1, y1 = (int(v) + radius + 1 for v in points.max(axis=0))
    x1, y1 = min(w, x1), min(h, y1)
    if x1 <= x0 or y1 <= y0:
        return None
    canvas = np.zeros((y1 - y0, x1 - x0), np.uint8)
    local = (points - (x0, y0)).astype(np.int32)
    cv2.polylines(canvas, [local.reshape(-1, 1, 2)], False, 1, thickness=2 * radius + 1)
    for x, y in local:  # a single click: a dot
        cv2.circle(canvas, (int(x), int(y)), radius, 1, -1)
    ys, xs = np.nonzero(canvas)
    if not len(xs):
        return None
    box = (x0 + int(xs.min()), y0 + int(ys.min()), x0 + int(xs.max()) + 1, y0 + int(ys.max()) + 1)
    mask = canvas[box[1] - y0:box[3] - y0, box[0] - x0:box[2] - x0].astype(bool)
    return Instance(class_index, class_name, DRAWN_SCORE, (float(box[0]), float(box[1]), float(box[2]),
                    float(box[3])), mask if with_mask else None, box if with_mask else None)


def prompted_instance(class_index: int, class_name: str, mask: np.ndarray, *, shape: str) -> Instance | None:
    """An instance the Smart tool found (its mask at the image's size) in the shape the model gives: "mask" (kept
    inside its box), "box" (the mask's bounds) or "rotated" (the least-area rotated box around the mask's pixels,
    their corners, not their centres); None for an empty mask."""
    import numpy as np

    from app.inference.model.instances import Instance

    ys, xs = np.nonzero(mask)
    if not len(xs):
        return None
    x0, y0, x1, y1 = int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1
    box = (float(x0), float(y0), float(x1), float(y1))
    if shape == "mask":
        inside = np.ascontiguousarray(mask[y0:y1, x0:x1], dtype=bool)
        return Instance(class_index, class_name, DRAWN_SCORE, box, inside, (x0, y0, x1, y1))
    if shape == "rotated":
        return _rotated(class_index, class_name, mask[y0:y1, x0:x1], (x0, y0))
    return Instance(class_index, class_name, DRAWN_SCORE, box)


def _rotated(class_index: int, class_name: str, mask: np.ndarray, origin: tuple[int, int]) -> Instance:
    """The least-area rotated box around the corners of the pixels on `mask`'s outline (`origin`: its top-left in
    the image), its bounds as the axis-aligned box (as the decoder gives an oriented box)."""
    import cv2
    import numpy as np

    from app.inference.model.instances import Instance

    contours, _ = cv2.findContours(mask.astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
    points = np.concatenate([c.reshape(-1, 2) for c in contours]).astype(np.float32) + np.asarray(origin, np.float32)
    square = np.asarray([[0, 0], [1, 0], [0, 1], [1, 1]], np.float32)  # each outline pixel's four corners
    corners = (points[:, None, :] + square[None]).reshape(-1, 2)
    (cx, cy), (w, h), degrees = cv2.minAreaRect(corners)
    angle = float(np.radians(degrees))
    cos, sin = np.cos(angle), np.sin(angle)
    dx, dy = abs(w / 2 * cos) + abs(h / 2 * sin), abs(w / 2 * sin) + abs(h / 2 * cos)
    return Instance(class_index, class_name, DRAWN_SCORE, (cx - dx, cy - dy, cx + dx, cy + dy), angle=angle,
                    rotated=(float(cx), float(cy), float(w), float(h), angle))


def redrawn(old: Instance, box: Box, image_hw: tuple[int, int]) -> Instance | None:
    """`old` drawn again as `box` (its class kept; a mask when it had one, an oriented box becomes axis-aligned)."""
    return drawn_instance(old.class_index, old.class_name, box, image_hw, with_mask=old.mask is not None)


class InstanceBook:
    """Every picture's model instances seen in this session and the reader's corrections, by picture."""

    def __init__(self) -> None:
        self._model: dict[ViewKey, Instances] = {}
        self._corrected: dict[ViewKey, Correction] = {}
        # per picture, the corrections before (undo) and after (redo) the one in force; None: the model's own
        self._undo: dict[ViewKey, list[Correction | None]] = {}
        self._redo: dict[ViewKey, list[Correction | None]] = {}

    def clear(self) -> None:
        """Another model: nothing seen, nothing corrected."""
        self._model.clear()
        self._corrected.clear()
        self._undo.clear()
        self._redo.clear()

    def saw(self, key: ViewKey, instances: Instances) -> None:
        self._model[key] = instances

    def is_corrected(self, key: ViewKey) -> bool:
        return key in self._corrected

    def items(self, key: ViewKey) -> tuple[Instance, ...]:
        """The picture's instances before the threshold: the corrected ones, else the model's."""
        corrected = self._corrected.get(key)
        if corrected is not None:
            return corrected.items
        seen = self._model.get(key)
        return seen.items if seen is not None else ()

    def shown(self, key: ViewKey, threshold: float | None) -> Instances | None:
        """What the picture shows at `threshold`; None for a picture never seen."""
        seen = self._model.get(key)
        if seen is None:
            return None
        from app.inference.model.instances import Instances

        return Instances(above(self.items(key), threshold), seen.image_hw)

    def delete(self, key: ViewKey, target: Instance) -> None:
        self._correct(key, tuple(i for i in self.items(key) if i is not target))

    def add(self, key: ViewKey, instance: Instance) -> None:
        self._correct(key, (*self.items(key), instance))

    def replace(self, key: ViewKey, target: Instance, instance: Instance) -> None:
        self._correct(key, tuple(instance if i is target else i for i in self.items(key)))

    def _correct(self, key: ViewKey, items: tuple[Instance, ...]) -> None:
        seen = self._model[key]  # a correction is of a picture shown
        self._undo.setdefault(key, []).append(self._corrected.get(key))
        self._redo.pop(key, None)
        self._corrected[key] = Correction(items, seen.image_hw)

    def can_undo(self, key: ViewKey) -> bool:
        return bool(self._undo.get(key))

    def undo(self, key: ViewKey) -> bool:
        """The picture's last correction taken back (its first: the model's instances again); False when none."""
        return self._step(key, self._undo, self._redo)

    def redo(self, key: ViewKey) -> bool:
        """The correction last taken back made again; False when none."""
        return self._step(key, self._redo, self._undo)

    def _step(self, key: ViewKey, source: dict[ViewKey, list[Correction | None]],
              target: dict[ViewKey, list[Correction | None]]) -> bool:
        steps = source.get(key)
        if not steps:
            return False
        target.setdefault(key, []).append(self._corrected.get(key))
        state = steps.pop()
        if state is None:
            self._corrected.pop(key, None)
        else:
            self._corrected[key] = state
        return True

    def labelled(self, name_of: Callable[[ViewKey], str | None], threshold: float | None,
                 leave_out: Callable[[ViewKey], bool]) -> list[tuple[str, Instances]]:
        """(name, instances) per picture seen, in the order seen, at `threshold`: those `leave_out` says and those
        `name_of` cannot name (None) left out."""
        found: list[tuple[str, Instances]] = []
        for key in self._model:
            name = name_of(key)
            shown = self.shown(key, threshold)
            if name is not None and shown is not None and not leave_out(key):
                found.append((name, shown))
        return found
