"""Agreement of two label maps: a prediction against a ground-truth reference, or model B against model A.

Pure numpy on uint8 label maps at the image's size (value = class index); no files, no Qt, so the viewer can
paint a difference overlay from the same functions the CLI reports with.

Conventions (docs/cli.md's "Ground truth" section says the same):
- Metrics are per foreground class (index >= 1); class 0 is the background.
- A class absent from both maps is perfect (IoU = Dice = precision = recall = 1) and is left out of the mean.
- precision is undefined (None) when the class was not predicted but is in the reference; recall is undefined
  when the class is predicted but absent from the reference. IoU and Dice are then 0.
- The image's `iou` / `dice` is the mean over the foreground classes present in the prediction or the
  reference; with no foreground anywhere (both empty) it is 1.0: nothing to find, nothing found.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# difference_map codes (one uint8 per pixel)
TN, TP, FP, FN, CONFUSED = 0, 1, 2, 3, 4
# disagreement_map codes
AGREE, ONLY_A, ONLY_B, BOTH_DIFFERENT = 0, 1, 2, 3


@dataclass(frozen=True)
class ClassMetrics:
    """One foreground class of one image: pixel counts and the ratios made of them."""

    index: int
    tp: int
    fp: int
    fn: int
    present: bool  # in the prediction or the reference (False: perfect, left out of the mean)
    iou: float
    dice: float
    precision: float | None  # None: the class was not predicted (but is in the reference)
    recall: float | None  # None: the class is not in the reference (but was predicted)


@dataclass(frozen=True)
class ImageMetrics:
    """Every foreground class of one image, and the means over the classes present."""

    classes: tuple[ClassMetrics, ...]  # classes 1..n-1, in index order
    iou: float
    dice: float

    def of(self, index: int) -> ClassMetrics:
        return self.classes[index - 1]


def confusion(pred: np.ndarray, ref: np.ndarray, n_classes: int) -> np.ndarray:
    """The n×n confusion matrix, rows = reference class, columns = predicted class, in one pass (bincount).
    `n` grows to cover any label value above `n_classes - 1` in either map."""
    if pred.shape != ref.shape:
        raise ValueError(f"prediction {pred.shape} and reference {ref.shape} differ in size")
    n = max(int(n_classes), int(pred.max(initial=0)) + 1, int(ref.max(initial=0)) + 1)
    # uint16 keeps the product small (n <= 256 → < 65536) and bincount's cast cheap
    codes = ref.astype(np.uint16) * np.uint16(n) + pred.astype(np.uint16) if n > 16 else \
        ref.astype(np.uint8) * np.uint8(n) + pred.astype(np.uint8)
    return np.bincount(codes.ravel(), minlength=n * n).reshape(n, n)


def class_metrics(matrix: np.ndarray, index: int) -> ClassMetrics:
    """The metrics of class `index` from a confusion matrix (rows reference, columns prediction)."""
    tp = int(matrix[index, index])
    fn = int(matrix[index].sum()) - tp
    fp = int(matrix[:, index].sum()) - tp
    if tp + fp + fn == 0:
        return ClassMetrics(index, 0, 0, 0, False, 1.0, 1.0, 1.0, 1.0)
    return ClassMetrics(index, tp, fp, fn, True, tp / (tp + fp + fn), 2 * tp / (2 * tp + fp + fn),
                        tp / (tp + fp) if tp + fp else None, tp / (tp + fn) if tp + fn else None)


def image_metrics(pred: np.ndarray, ref: np.ndarray, n_classes: int) -> ImageMetrics:
    """IoU, Dice, precision, recall and FP/FN pixels of every foreground class 1..n_classes-1, and the means."""
    return confusion_metrics(confusion(pred, ref, n_classes), n_classes)


def add_confusion(total: np.ndarray | None, matrix: np.ndarray) -> np.ndarray:
    """`total + matrix`, the smaller grown to the larger's size (a slice may hold a label value the others
    do not): a volume's confusion is the sum of its slices'."""
    if total is None:
        return matrix.astype(np.int64)
    n = max(total.shape[0], matrix.shape[0])
    grown = np.zeros((n, n), np.int64)
    grown[: total.shape[0], : total.shape[1]] += total
    grown[: matrix.shape[0], : matrix.shape[1]] += matrix
    return grown


def confusion_metrics(matrix: np.ndarray, n_classes: int) -> ImageMetrics:
    """`image_metrics` of a confusion matrix (rows reference, columns prediction): of one image, or of a whole
    volume from the sum of its slices' matrices (IoU and Dice over every voxel, not a mean of slices)."""
    classes = tuple(class_metrics(matrix, i) for i in range(1, max(int(n_classes), 2)))
    present = [c for c in classes if c.present]
    if not present:
        return ImageMetrics(classes, 1.0, 1.0)
    return ImageMetrics(classes, float(np.mean([c.iou for c in present])),
                        float(np.mean([c.dice for c in present])))


def difference_map(pred: np.ndarray, ref: np.ndarray, class_index: int | None = None) -> np.ndarray:
    """Per pixel, uint8: TN 0, TP 1, FP 2, FN 3 for one class; for `class_index` None, over all foreground
    classes: 0 both background, 1 same class, 2 predicted on background, 3 missed, 4 CONFUSED (both foreground,
    different classes)."""
    if pred.shape != ref.shape:
        raise ValueError(f"prediction {pred.shape} and reference {ref.shape} differ in size")
    out = np.zeros(pred.shape, np.uint8)
    if class_index is not None:
        p, r = pred == class_index, ref == class_index
        out[p & r], out[p & ~r], out[~p & r] = TP, FP, FN
        return out
    p, r = pred > 0, ref > 0
    same = pred == ref
    out[p & r & same], out[p & ~r], out[~p & r], out[p & r & ~same] = TP, FP, FN, CONFUSED
    return out


def disagreement_map(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per pixel, uint8: AGREE 0 (same label, background included), ONLY_A 1 (A foreground, B background),
    ONLY_B 2, BOTH_DIFFERENT 3 (both foreground, different classes)."""
    if a.shape != b.shape:
        raise ValueError(f"map A {a.shape} and map B {b.shape} differ in size")
    out = np.zeros(a.shape, np.uint8)
    fa, fb = a > 0, b > 0
    out[fa & ~fb], out[~fa & fb], out[fa & fb & (a != b)] = ONLY_A, ONLY_B, BOTH_DIFFERENT
    return out
