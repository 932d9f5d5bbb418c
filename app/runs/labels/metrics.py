"""Instances scored against a reference: per image, precision and recall at IoU 0.5; over a folder, mAP@0.5:0.95
computed as pycocotools' COCOeval computes it (iouType by the data: masks where both have them, else boxes) —
its greedy matching best score first within each class, 10 IoU thresholds 0.50:0.05:0.95, 101-point interpolated
precision, at most 100 detections per image and class, area 'all', the mean over the thresholds and the classes
that have a reference instance. Images' detections tie on equal scores in the order the pairs are given (COCOeval:
ascending image id).

`folder_score` scores a whole LabelSet against its reference as COCOeval scores a results file against its dataset
(the reference's images, ascending image id).

A reference's crowd regions (`Instance.crowd`, COCO's `iscrowd` 1) are scored as COCOeval scores them: no object
to find, their IoU the overlap over the detection's own area, a detection matching one (only when no object is left
for it) ignored, neither right nor wrong.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from app.inference.model.instances import Instance, Instances
from app.runs.labels.records import LabelSet

IOU_THRESHOLDS = np.linspace(0.5, 0.95, 10)  # COCOeval's: np.linspace(.5, .95, round((.95 - .5) / .05) + 1)
RECALL_THRESHOLDS = np.linspace(0.0, 1.0, 101)
MAX_DETECTIONS = 100


@dataclass(frozen=True)
class ImageScore:
    """One image against its reference at one IoU: matched, found and reference counts. Precision is 1 when
    nothing was found, recall 1 when there was nothing to find."""

    matched: int
    found: int
    reference: int

    @property
    def precision(self) -> float:
        return self.matched / self.found if self.found else 1.0

    @property
    def recall(self) -> float:
        return self.matched / self.reference if self.reference else 1.0


@dataclass(frozen=True)
class FolderScore:
    """A folder against its reference: each reference image's score at IoU 0.5 (by relative path, in the
    reference's order), the folder's mAP@0.5:0.95, and the found images the reference does not have (not scored)."""

    images: tuple[tuple[str, ImageScore], ...]
    mean_average_precision: float
    unscored: tuple[str, ...]


def folder_score(reference: LabelSet, found: LabelSet) -> FolderScore:
    """Every image of `reference` scored against what `found` holds for it (nothing, when it holds none), as
    COCOeval scores a results file against its dataset: its images in ascending image id for the mAP."""
    answers = found.by_name()
    pairs = {image.name: (image.instances, answers.get(image.name, Instances((), image.instances.image_hw)))
             for image in reference.images}
    scores = tuple((name, image_score(*pair)) for name, pair in pairs.items())
    ordered = [pairs[image.name] for image in sorted(reference.images, key=lambda image: image.order)]
    unscored = tuple(image.name for image in found.images if image.name not in pairs)
    return FolderScore(scores, mean_average_precision(ordered), unscored)


def iou(a: Instance, b: Instance) -> float:
    """Mask IoU when both have masks, else box IoU (COCO's: a box's area is w × h). Against a crowd region `b`,
    COCO's: the overlap over `a`'s own area."""
    if a.mask is not None and a.mask_box is not None and b.mask is not None and b.mask_box is not None:
        inter = float(_mask_overlap(a.mask, a.mask_box, b.mask, b.mask_box))
        own, other = float(np.count_nonzero(a.mask)), float(np.count_nonzero(b.mask))
    else:
        ax0, ay0, ax1, ay1 = a.box
        bx0, by0, bx1, by1 = b.box
        inter = max(0.0, min(ax1, bx1) - max(ax0, bx0)) * max(0.0, min(ay1, by1) - max(ay0, by0))
        own, other = (ax1 - ax0) * (ay1 - ay0), (bx1 - bx0) * (by1 - by0)
    union = own if b.crowd else own + other - inter
    return inter / union if inter > 0 and union > 0 else 0.0


def _mask_overlap(a: np.ndarray, a_box: tuple[int, int, int, int], b: np.ndarray,
                  b_box: tuple[int, int, int, int]) -> int:
    x0, y0 = max(a_box[0], b_box[0]), max(a_box[1], b_box[1])
    x1, y1 = min(a_box[2], b_box[2]), min(a_box[3], b_box[3])
    if x1 <= x0 or y1 <= y0:
        return 0
    return int(np.count_nonzero(a[y0 - a_box[1]:y1 - a_box[1], x0 - a_box[0]:x1 - a_box[0]]
                                & b[y0 - b_box[1]:y1 - b_box[1], x0 - b_box[0]:x1 - b_box[0]]))


def image_score(reference: Instances, found: Instances, *, threshold: float = 0.5) -> ImageScore:
    """`found` matched to `reference` at IoU `threshold`, class by class, best score first (every detection).
    A crowd region counts neither as an object to find nor, with what matched it, as found."""
    matched = found_count = 0
    for class_index in {item.class_index for item in found.items}:
        truth = _reference_order([item for item in reference.items if item.class_index == class_index])
        dets = _by_score([item for item in found.items if item.class_index == class_index])
        hit, ignored = _match(_ious(dets, truth), [g.crowd for g in truth], np.array([threshold]))
        matched += int((hit[0] & ~ignored[0]).sum())
        found_count += int((~ignored[0]).sum())
    return ImageScore(matched, found_count, sum(1 for item in reference.items if not item.crowd))


def mean_average_precision(pairs: Sequence[tuple[Instances, Instances]]) -> float:
    """COCOeval's AP@[.5:.95] (area all, 100 detections) of each image's found instances (second) against its
    reference (first); -1 when no class has a reference instance (COCOeval's summary says so too)."""
    classes = sorted({item.class_index for reference, found in pairs for item in (*reference.items, *found.items)})
    precisions = [_class_precision(pairs, class_index) for class_index in classes]
    kept = [p for p in precisions if p is not None]
    if not kept:
        return -1.0
    return float(np.mean(np.concatenate(kept)))


def _class_precision(pairs: Sequence[tuple[Instances, Instances]], class_index: int) -> np.ndarray | None:
    """The [thresholds × recall points] precision of one class over every image; None with no reference in it
    (crowd regions are no reference)."""
    scores: list[np.ndarray] = []
    hits: list[np.ndarray] = []
    ignores: list[np.ndarray] = []
    references = 0
    for reference, found in pairs:
        truth = _reference_order([item for item in reference.items if item.class_index == class_index])
        dets = _by_score([item for item in found.items if item.class_index == class_index])[:MAX_DETECTIONS]
        references += sum(1 for item in truth if not item.crowd)
        scores.append(np.array([item.score for item in dets], dtype=np.float64))
        hit, ignored = _match(_ious(dets, truth), [g.crowd for g in truth], IOU_THRESHOLDS)
        hits.append(hit)
        ignores.append(ignored)
    if references == 0:
        return None
    order = np.argsort(-np.concatenate(scores), kind="mergesort")
    matched = np.concatenate(hits, axis=1)[:, order]
    ignored = np.concatenate(ignores, axis=1)[:, order]
    return np.stack([_interpolated(m & ~i, ~m & ~i, references) for m, i in zip(matched, ignored, strict=True)])


def _by_score(items: list[Instance]) -> list[Instance]:
    order = np.argsort([-item.score for item in items], kind="mergesort")
    return [items[i] for i in order]


def _reference_order(items: list[Instance]) -> list[Instance]:
    """Objects first, crowd regions after them, each in their own order (COCOeval's sort by `_ignore`)."""
    return [item for item in items if not item.crowd] + [item for item in items if item.crowd]


def _ious(dets: list[Instance], truth: list[Instance]) -> np.ndarray:
    return np.array([[iou(d, g) for g in truth] for d in dets], dtype=np.float64).reshape(len(dets), len(truth))


def _match(ious: np.ndarray, crowd: list[bool], thresholds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[thresholds × detections] whether each detection (best score first) matched, and whether what it matched
    is a crowd region (then it is ignored): each takes the free reference of highest IoU at or above the threshold,
    a crowd region only when no object is left for it, and a crowd region stays free (COCOeval's evaluateImg)."""
    n_dets, n_truth = ious.shape
    matched = np.zeros((len(thresholds), n_dets), dtype=bool)
    ignored = np.zeros((len(thresholds), n_dets), dtype=bool)
    for t, threshold in enumerate(thresholds):
        taken = np.zeros(n_truth, dtype=bool)
        for d in range(n_dets):
            best, best_iou = -1, min(float(threshold), 1 - 1e-10)
            for g in range(n_truth):
                if taken[g] and not crowd[g]:
                    continue
                if best > -1 and not crowd[best] and crowd[g]:
                    break
                if ious[d, g] >= best_iou:
                    best, best_iou = g, float(ious[d, g])
            if best >= 0:
                taken[best] = matched[t, d] = True
                ignored[t, d] = crowd[best]
    return matched, ignored


def _interpolated(true_positive: np.ndarray, false_positive: np.ndarray, references: int) -> np.ndarray:
    """COCOeval's accumulate for one threshold: precision made monotone, read at the 101 recall points."""
    tp = np.cumsum(true_positive).astype(np.float64)
    fp = np.cumsum(false_positive).astype(np.float64)
    recall = tp / references
    precision = tp / (fp + tp + np.spacing(1))
    for i in range(len(precision) - 1, 0, -1):
        precision[i - 1] = max(precision[i - 1], precision[i])
    out = np.zeros(len(RECALL_THRESHOLDS))
    indices = np.searchsorted(recall, RECALL_THRESHOLDS, side="left")
    valid = indices < len(precision)
    out[valid] = precision[indices[valid]]
    return out
