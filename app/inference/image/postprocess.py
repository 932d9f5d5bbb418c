"""Pure postprocessing: the model's output becomes a uint8 label mask at the image's exact size, or top-k.

Multi-class scores are upsampled as a clinician expects to see them: the label of each image pixel is the
argmax of the *bilinearly interpolated* scores, so edges are smooth rather than staircased. That is computed
exactly but only where it can differ from the low-resolution argmax (a band around label edges), which makes
it several times cheaper than interpolating every class plane at full size.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from app.errors import InferenceError
from app.inference.image.half import write_half
from app.inference.image.preprocess import Geometry
from app.inference.model.spec import ModelSpec, OutputSpec, PostprocessSpec

_DENSE_EDGES = 0.12  # share of low-res pixels on a label edge above which the dense path is faster


@dataclass(frozen=True)
class Prediction:
    index: int
    name: str
    score: float


def top_k(spec: ModelSpec, output: np.ndarray) -> tuple[Prediction, ...]:
    """The `postprocess.top_k` best classes with their scores, best first."""
    array = np.asarray(output)
    if array.ndim < 1 or array.shape[0] != 1 or array.size == 0:
        raise InferenceError(f"{spec.path.name}: the model returned shape {list(array.shape)}, expected [1, K]")
    logits = array.astype(np.float64).reshape(-1)
    if logits.size == 1:  # one score: the probability of the positive class
        p = 1.0 / (1.0 + np.exp(-logits[0])) if spec.output.activation == "sigmoid" else float(logits[0])
        scores = np.array([1.0 - p, p])
    elif spec.output.activation == "sigmoid":
        scores = 1.0 / (1.0 + np.exp(-logits))
    elif spec.output.activation == "softmax":
        shifted = np.exp(logits - logits.max())
        scores = shifted / shifted.sum()
    else:
        scores = logits
    order = np.argsort(-scores, kind="stable")[: spec.postprocess.top_k]
    names = spec.class_names
    return tuple(
        Prediction(int(i), names[i] if i < len(names) else f"class {i}", float(scores[i])) for i in order
    )


def clean_mask(mask: np.ndarray, post: PostprocessSpec) -> np.ndarray:
    """Optional closing, then removal of components smaller than `min_area` pixels."""
    if post.close_kernel > 1:
        mask = close_classes(mask, post.close_kernel)
    if post.min_area > 0:
        mask = drop_small_components(mask, post.min_area)
    return mask


def close_classes(mask: np.ndarray, kernel_size: int) -> np.ndarray:
    """Morphological closing per class; closing only fills background, never another class."""
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (kernel_size, kernel_size))
    result: np.ndarray = mask.copy()
    for label in _labels_present(mask):
        closed = cv2.morphologyEx((mask == label).view(np.uint8), cv2.MORPH_CLOSE, kernel)
        result[(closed > 0) & (result == 0)] = label
    return result


def drop_small_components(mask: np.ndarray, min_area: int) -> np.ndarray:
    """Set connected components (8-connected, per class) smaller than `min_area` pixels to background.

    Each class is labelled only inside its bounding box: defects usually cover a small part of the image, and
    labelling a full 1080p plane costs ~10 ms per class where the box is often a few thousand pixels.
    """
    result: np.ndarray = mask.copy()
    for label in _labels_present(mask):
        x, y, w, h = cv2.boundingRect((mask == label).view(np.uint8))
        box = (mask[y : y + h, x : x + w] == label).view(np.uint8)
        count, components, stats, _ = cv2.connectedComponentsWithStats(
            box, connectivity=8, ltype=cv2.CV_16U if box.size < 65535 * 4 else cv2.CV_32S)
        small = np.flatnonzero(stats[1:, cv2.CC_STAT_AREA] < min_area) + 1
        if small.size == count - 1:  # every component is small: the whole class goes
            result[y : y + h, x : x + w][box.view(bool)] = 0
        elif small.size:  # a lookup per label, not np.isin: that sorts int64 copies (GBs on a 16384² tiled mask)
            drop = np.zeros(count, bool)
            drop[small] = True
            result[y : y + h, x : x + w][drop[components]] = 0
    return result


def class_pixel_counts(mask: np.ndarray) -> np.ndarray:
    """Pixels per label value 0..255 (int64, length 256)."""
    hist = cv2.calcHist([np.ascontiguousarray(mask, dtype=np.uint8)], [0], None, [256], [0, 256])
    return hist.ravel().astype(np.int64)


def _labels_present(mask: np.ndarray) -> list[int]:
    return [int(v) for v in np.flatnonzero(class_pixel_counts(mask)) if v != 0]


def _planes(spec: ModelSpec, output: np.ndarray) -> np.ndarray:
    """The batch-of-one output as (C, h, w), checked against what the spec expects."""
    out = spec.output
    if output.ndim == 4 and output.shape[0] == 1 and out.channel_axis in (1, 3):
        return output[0] if out.channel_axis == 1 else np.moveaxis(output[0], -1, 0)
    if output.ndim == 3 and output.shape[0] == 1 and out.channel_axis is None:
        return output
    expected = "[1, H, W]" if out.channel_axis is None else "[1, C, H, W]" if out.channel_axis == 1 else "[1, H, W, C]"
    raise InferenceError(f"{spec.path.name}: the model returned shape {list(output.shape)}, expected {expected}")


def _crop(planes: np.ndarray, geometry: Geometry) -> np.ndarray:
    """Cut the content region out of (C, h, w) planes laid on the tensor's own grid."""
    return planes[:, : geometry.content_hw[0], : geometry.content_hw[1]]


def _warp_to_image(plane: np.ndarray, geometry: Geometry, interpolation: int) -> np.ndarray:
    """Map a 2-D plane on a strided output grid to the image's pixels, pixel centres aligned exactly.

    Image pixel x sits at content x' = (x + ½)·content/image, the same in tensor pixels, and at output
    (x' · out/tensor) − ½; cropping to whole output cells instead would shift edges by up to half a cell.
    """
    h, w = plane.shape
    ay = (h / geometry.tensor_hw[0]) * (geometry.content_hw[0] / geometry.image_hw[0])
    ax = (w / geometry.tensor_hw[1]) * (geometry.content_hw[1] / geometry.image_hw[1])
    matrix = np.array([[ax, 0.0, 0.5 * ax - 0.5], [0.0, ay, 0.5 * ay - 0.5]], np.float64)
    return cv2.warpAffine(plane, matrix, (geometry.image_hw[1], geometry.image_hw[0]),
                          flags=interpolation | cv2.WARP_INVERSE_MAP, borderMode=cv2.BORDER_REPLICATE)


def _scores_to_mask(planes: np.ndarray, image_hw: tuple[int, int]) -> np.ndarray:
    planes = planes.astype(np.float32, copy=False)
    low = argmax_planes(planes)
    h, w = low.shape
    if (h, w) == image_hw:
        return low
    if h * w > image_hw[0] * image_hw[1]:
        return _resize_nearest(low, image_hw)  # shrinking: the nearest label is as good as any
    kernel = np.ones((3, 3), np.uint8)
    edges = cv2.compare(cv2.dilate(low, kernel), cv2.erode(low, kernel), cv2.CMP_NE)
    if cv2.countNonZero(edges) > _DENSE_EDGES * h * w:  # speckled maps: interpolating everything is cheaper
        size = (image_hw[1], image_hw[0])
        return argmax_planes(np.stack([cv2.resize(p, size, interpolation=cv2.INTER_LINEAR) for p in planes]))
    mask = _resize_nearest(low, image_hw)
    _refine_edges(mask, edges, planes)
    return mask


def argmax_planes(planes: np.ndarray) -> np.ndarray:
    """Argmax over axis 0 of (C, h, w) as uint8, first maximum wins (as numpy), with OpenCV's SIMD ops."""
    best = np.ascontiguousarray(planes[0])
    labels: np.ndarray = np.zeros(best.shape, np.uint8)
    for c in range(1, min(len(planes), 256)):
        plane = np.ascontiguousarray(planes[c])
        greater = cv2.compare(plane, best, cv2.CMP_GT)
        # numpy for the scalar: OpenCV reads a Python int as a 1×1 matrix when the image is 1×1 too
        np.bitwise_and(greater, np.uint8(c), out=greater)
        labels = cv2.max(labels, greater)  # c only grows, so max == "set to c"
        best = cv2.max(best, plane)
    return labels


def _refine_edges(mask: np.ndarray, edges: np.ndarray, planes: np.ndarray) -> None:
    """Where the low-res 3×3 neighbourhood is not uniform (`edges`), relabel with the argmax of bilinear scores.

    Elsewhere the bilinear mix of scores has the same argmax as every sample it mixes, so nearest is exact.
    """
    points = cv2.findNonZero(_resize_nearest(edges, mask.shape))  # row-major like np.nonzero, ~3x faster
    if points is None:
        return
    points = points.reshape(-1, 2)  # N×1×2 in OpenCV 4, N×2 in 5
    xs, ys = points[:, 0].astype(np.intp), points[:, 1].astype(np.intp)
    h, w = edges.shape
    sy = np.clip((ys + 0.5) * (h / mask.shape[0]) - 0.5, 0, h - 1)
    sx = np.clip((xs + 0.5) * (w / mask.shape[1]) - 0.5, 0, w - 1)
    y0, x0 = sy.astype(np.intp), sx.astype(np.intp)
    y1, x1 = np.minimum(y0 + 1, h - 1), np.minimum(x0 + 1, w - 1)
    wy, wx = (sy - y0).astype(np.float32), (sx - x0).astype(np.float32)
    mixed = (planes[:, y0, x0] * ((1 - wy) * (1 - wx)) + planes[:, y0, x1] * ((1 - wy) * wx)
             + planes[:, y1, x0] * (wy * (1 - wx)) + planes[:, y1, x1] * (wy * wx))
    mask[ys, xs] = mixed.argmax(axis=0).astype(np.uint8)


def _threshold_in_output_units(out: OutputSpec) -> float:
    """sigmoid(x) > t  ⇔  x > logit(t): thresholding logits spares a sigmoid over every pixel."""
    if out.activation != "sigmoid":
        return out.threshold
    t = min(max(out.threshold, 1e-7), 1 - 1e-7)
    return float(np.log(t / (1 - t)))


def _resize_nearest(labels: np.ndarray, hw: tuple[int, int]) -> np.ndarray:
    if labels.shape == hw:
        return labels
    return cv2.resize(labels, (hw[1], hw[0]), interpolation=cv2.INTER_NEAREST)


# --- kept scores: probabilities at the working size, so a threshold or a heatmap needs no new model run ---

def probabilities(spec: ModelSpec, output: np.ndarray, geometry: Geometry) -> tuple[np.ndarray, Geometry] | None:
    """The model's per-pixel probabilities at the working size, float16 (C, h, w), and the geometry that maps
    them to the image: sigmoid for a binary output, softmax (or sigmoid, as the spec says) over the classes of a
    scores output. None for a label map (a device-side argmax): there are no scores to keep.

    Kept at the working size, not the image's: a 1080p image with 3 classes is 12 MB in float16, and only what
    is shown or written is brought to the image's size (`probability_at_image_size`). An output on the tensor's
    grid is cut to the image's region (the padding is never shown), its geometry then says the tensor *is* that
    region; a strided output keeps its whole grid, which the warp to the image needs.
    """
    out = spec.output
    if out.kind not in ("binary", "scores", "anomaly"):
        return None
    planes = _planes(spec, np.asarray(output))
    if planes.shape[1:] == geometry.tensor_hw:
        planes = _crop(planes, geometry)
        geometry = Geometry(geometry.image_hw, geometry.content_hw, geometry.content_hw)
    return _activated(planes.astype(np.float32, copy=False), out.activation), geometry


def _activated(planes: np.ndarray, activation: str) -> np.ndarray:
    """(C, h, w) float32 → probabilities as float16.

    Plane by plane with OpenCV's SIMD operations, each product written straight as float16: numpy's own
    float16 cast alone took 15 ms for three 1080p planes, a third more than the whole softmax here.
    """
    kept = np.empty(planes.shape, np.float16)
    if activation == "softmax" and len(planes) > 1:
        top = planes[0]
        for plane in planes[1:]:
            top = cv2.max(top, plane)
        exps = [cv2.exp(cv2.subtract(np.ascontiguousarray(plane), top)) for plane in planes]  # ≤ 1: no overflow
        total = exps[0].copy()
        for e in exps[1:]:
            cv2.add(total, e, dst=total)
        inverse = cv2.divide(1.0, total)
        for c, e in enumerate(exps):
            kept[c] = cv2.multiply(e, inverse, dtype=cv2.CV_16F)
    elif activation == "sigmoid":
        for c, plane in enumerate(planes):
            # exp(-x) = inf for a very negative logit: 1 / (1 + inf) = 0, as it should be
            # OpenCV takes a scalar as the second operand; its stubs only say arrays
            denominator = cv2.add(cv2.exp(cv2.multiply(np.ascontiguousarray(plane), -1.0)),  # type: ignore[call-overload]
                                  1.0)
            kept[c] = cv2.divide(1.0, denominator, dtype=cv2.CV_16F)
    else:  # the graph already ends in its activation (or the model says "none"): values are probabilities
        write_half(kept, np.clip(planes, 0.0, 1.0))  # not numpy's cast: slow below float16's normal range
    return kept


def image_score(scores: np.ndarray, geometry: Geometry) -> float:
    """The highest foreground probability inside the image's region of the output grid (binary scores)."""
    h, w = scores.shape[1:]
    rows = -(-geometry.content_hw[0] * h // geometry.tensor_hw[0])  # ceil: a partly covered cell counts
    cols = -(-geometry.content_hw[1] * w // geometry.tensor_hw[1])
    return float(scores[0, :rows, :cols].max())


def probability_at_image_size(scores: np.ndarray, geometry: Geometry, class_index: int | None = None) -> np.ndarray:
    """One probability plane (float32 0–1) at `geometry.image_hw`, mapped exactly as the mask is.

    `class_index` None: the foreground of a binary output, the winning class's probability of a multi-class
    one (its maximum over the classes, taken at the working size and then interpolated).
    """
    plane = _winning(scores) if class_index is None else scores[class_index]
    return _plane_to_image(plane.astype(np.float32), geometry)


def anomaly_outputs(spec: ModelSpec, outputs: np.ndarray | tuple[np.ndarray, ...],
                    ) -> tuple[np.ndarray, float, np.ndarray | None]:
    """An anomaly model's run (map, score[, mask]) as (map, image score, exported mask or None), checked."""
    if not isinstance(outputs, tuple) or len(outputs) != len(spec.output.fetched):
        raise InferenceError(f"{spec.path.name}: expected the outputs {', '.join(spec.output.fetched)}")
    score = np.asarray(outputs[1])
    if score.size != 1:
        raise InferenceError(f"{spec.path.name}: the score output {spec.output.score_name} has shape "
                             f"{list(score.shape)}, expected [1] or [1, 1]")
    return np.asarray(outputs[0]), float(score.reshape(-1)[0]), (np.asarray(outputs[2]) if len(outputs) > 2
                                                                   else None)


def _winning(scores: np.ndarray) -> np.ndarray:
    winning: np.ndarray = scores[0] if len(scores) == 1 else scores.max(axis=0)
    return winning


def _plane_to_image(plane: np.ndarray, geometry: Geometry) -> np.ndarray:
    if plane.shape != geometry.tensor_hw:
        return _warp_to_image(plane, geometry, cv2.INTER_LINEAR)
    plane = plane[: geometry.content_hw[0], : geometry.content_hw[1]]
    if plane.shape == geometry.image_hw:
        return np.ascontiguousarray(plane)
    return cv2.resize(plane, (geometry.image_hw[1], geometry.image_hw[0]), interpolation=cv2.INTER_LINEAR)
