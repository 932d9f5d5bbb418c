"""A segmentation result's labels kept at the model's working size, brought to the image's pixels only where and
when they are needed.

A 12000×9000 photo through a 540×960 model made its 108-megapixel mask (and cleaned it) before anything was shown,
though the viewer shows an 8192-px overview and, zoomed in, a few 512-px tiles. A `LabelMap` keeps what decides
the labels — the model's planes on their own grid (`Decision`) and how that grid maps to the image — and makes:

- `full()`: the mask at the image's size, exactly as the pipeline always made it (the CLI's written masks, metrics
  against references, verdict area rules, the editor and review); made once, on first use, and kept;
- `at_size(hw)`: the same decision taken at another size (the viewer's overview), cleaned with `min_area` and
  `close_kernel` scaled to that size — equal to the full mask brought down up to pixels on label edges and
  components near `min_area` (the full mask brought down exactly, once it exists);
- `region(y0, y1, x0, x1)`: a window of the full mask at full resolution (the viewer's detail tiles), decided
  in that window alone; cleaning is exact there (see `_clean_window`), the decision itself agrees with `full()`
  except where a pixel is within float rounding of a tie or the threshold (a window of `full()` once it exists).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from typing import Any, cast

import cv2
import numpy as np

from app.inference.image import postprocess as pp
from app.inference.image.preprocess import Geometry
from app.inference.model.spec import ModelSpec, PostprocessSpec


@dataclass(frozen=True, eq=False)
class Decision:
    """How labels follow from planes on the model's output grid (`geometry` maps that grid to the image).

    rule "labels": `planes[0]` are labels (nearest); "above" / "at_least": foreground where `planes[0]` > / >=
    `cut` (bilinear); "argmax": the argmax of the bilinearly interpolated planes, and — with `floor` — background
    where the interpolated `floor_plane` (the winner's probability) is below `floor`.
    """

    rule: str
    planes: np.ndarray  # (C, h, w): uint8 for "labels", float32 otherwise
    geometry: Geometry
    cut: float = 0.0
    floor: float | None = None
    floor_plane: np.ndarray | None = None  # (h, w) float32

    @property
    def nbytes(self) -> int:
        return self.planes.nbytes + (self.floor_plane.nbytes if self.floor_plane is not None else 0)


class LabelMap:
    """uint8 labels of an image, from a `Decision` on demand (or from a mask already made: `of_array`)."""

    def __init__(self, image_hw: tuple[int, int], post: PostprocessSpec, decision: Decision | None = None, *,
                 mask: np.ndarray | None = None) -> None:
        if decision is None and mask is None:
            raise ValueError("a LabelMap needs a decision or a mask")
        self.image_hw = (int(image_hw[0]), int(image_hw[1]))
        self.post = post
        self.decision = decision
        self._mask = mask
        self._lock = threading.Lock()  # the worker and the GUI thread (detail tiles) may both ask

    @classmethod
    def of_array(cls, mask: np.ndarray, post: PostprocessSpec | None = None) -> LabelMap:
        """A map around a mask already at the image's size (a tiled run's, a correction, a test's)."""
        return cls(mask.shape[:2], post or PostprocessSpec(), mask=mask)

    @property
    def shape(self) -> tuple[int, int]:
        return self.image_hw

    @property
    def ready(self) -> bool:
        """The full-resolution mask exists (made, or given)."""
        return self._mask is not None

    @property
    def nbytes(self) -> int:
        """Memory held now: the decision's planes and, once made, the full mask."""
        held = self._mask.nbytes if self._mask is not None else 0
        return held + (self.decision.nbytes if self.decision is not None else 0)

    def full(self) -> np.ndarray:
        """The mask at the image's size, cleaned as the pipeline cleans (made on first call, then kept; the
        decision is let go then: everything else is made from the mask, and its planes may be a view into a
        batch's whole output)."""
        if self._mask is None:
            with self._lock:
                if self._mask is None:
                    # no mask yet: the decision is still held (it is let go only once the mask is made)
                    self._mask = pp.clean_mask(decide(cast(Decision, self.decision), self.image_hw), self.post)
                    self.decision = None  # after the mask: a reader that saw no mask still has the decision
        return self._mask

    def at_size(self, hw: tuple[int, int]) -> np.ndarray:
        """The labels at `hw` (height, width): the full mask brought down (nearest) once it exists, else the
        decision taken at that size with `min_area` / `close_kernel` scaled by the pixels' area / side."""
        hw = (int(hw[0]), int(hw[1]))
        decision = self.decision  # before the mask (see full)
        if hw == self.image_hw:
            return self.full()
        if self._mask is not None:
            return cv2.resize(self._mask, (hw[1], hw[0]), interpolation=cv2.INTER_NEAREST)
        # read before the mask was seen missing: the decision had not been let go
        return pp.clean_mask(decide(cast(Decision, decision), hw), scaled_post(self.post, self.image_hw, hw))

    def region(self, y0: int, y1: int, x0: int, x1: int) -> np.ndarray:
        """Rows y0:y1, columns x0:x1 of the full mask (clipped to the image), without making all of it."""
        h, w = self.image_hw
        y0, y1, x0, x1 = max(0, y0), min(h, y1), max(0, x0), min(w, x1)
        decision = self.decision  # before the mask (see full): the GUI thread asks while the worker may make it
        if self._mask is not None:
            return self._mask[y0:y1, x0:x1]
        return _clean_window(cast(Decision, decision), self.post, self.image_hw, (y0, y1, x0, x1))  # as at_size

    def __getstate__(self) -> dict[str, Any]:  # a lock does not pickle (a Result sent between processes)
        return {k: v for k, v in self.__dict__.items() if k != "_lock"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()


def estimated_counts(mask: np.ndarray, image_hw: tuple[int, int]) -> np.ndarray:
    """Pixels per label value 0..255 (int64) of an image of `image_hw` from its labels at a smaller size: each
    pixel stands for the same area (image pixels / mask pixels), rounded so that the counts add up to the image
    (largest remainders)."""
    total = int(image_hw[0]) * int(image_hw[1])
    shares = pp.class_pixel_counts(mask).astype(np.float64) * (total / mask.size)
    counts = np.floor(shares).astype(np.int64)
    short = total - int(counts.sum())
    if short > 0:
        counts[np.argsort(-(shares - counts), kind="stable")[:short]] += 1
    return counts


def scaled_post(post: PostprocessSpec, image_hw: tuple[int, int], hw: tuple[int, int]) -> PostprocessSpec:
    """`post` for labels at `hw` standing for an image of `image_hw`: areas by the pixels' area ratio, the closing
    kernel by the side ratio (a component of `min_area` image pixels covers min_area × ratio pixels at `hw`)."""
    area = (hw[0] / image_hw[0]) * (hw[1] / image_hw[1])
    side = area ** 0.5
    min_area = max(1, round(post.min_area * area)) if post.min_area > 0 else 0
    radius = round((post.close_kernel // 2) * side) if post.close_kernel > 1 else 0  # an odd kernel stays centred
    return replace(post, min_area=min_area, close_kernel=2 * radius + 1 if radius >= 1 else 0)


# --- building decisions from what the model returned (the pipeline's postprocess stage) ---------------------

def segmentation_labels(spec: ModelSpec, output: np.ndarray, geometry: Geometry) -> LabelMap:
    """The labels of one model output (batch of 1) for an image of `geometry.image_hw`: a label map (device
    argmax), a binary or anomaly map (threshold) or class scores (argmax). The output's shape is checked here."""
    out = spec.output
    planes = pp._planes(spec, np.asarray(output))
    if out.kind == "labels":
        decision = Decision("labels", np.clip(planes[:1], 0, 255).astype(np.uint8), geometry)
    elif out.kind in ("binary", "anomaly"):
        cut = out.threshold if out.kind == "anomaly" else pp._threshold_in_output_units(out)
        decision = Decision("at_least" if out.kind == "anomaly" else "above", _float(planes[:1]), geometry, cut)
    else:
        decision = Decision("argmax", _float(planes), geometry)
    return _labels(decision, spec.postprocess)


def exported_labels(spec: ModelSpec, mask: np.ndarray, geometry: Geometry) -> LabelMap:
    """An anomaly model's own [1,1,h,w] mask (pred_mask) as 0/1 labels."""
    planes = pp._planes(spec, mask)
    return _labels(Decision("labels", (planes[:1] > 0).astype(np.uint8), geometry), spec.postprocess)


def segmentation_mask(spec: ModelSpec, output: np.ndarray, geometry: Geometry) -> np.ndarray:
    """Label mask (uint8, pixel = class index) at `geometry.image_hw` from one model output (batch of 1).

    The pipeline keeps the decision instead (segmentation_labels) and makes this mask when it is used."""
    return segmentation_labels(spec, output, geometry).full()


def relabel_scores(scores: np.ndarray, geometry: Geometry, spec: ModelSpec, *, threshold: float | None = None,
                   min_confidence: float | None = None) -> np.ndarray:
    """A new label mask from kept probabilities: binary → foreground where p > `threshold` (default: the
    spec's; an anomaly map: ≥); multi-class → argmax, and background where the winner's probability is below
    `min_confidence`; then the same `clean_mask` as the pipeline.

    Interpolation is of probabilities rather than logits, so on an output smaller than the image an edge pixel
    can differ from the pipeline's own mask; at the working size the labels are the same up to float16.
    """
    return relabelled(scores, geometry, spec, threshold=threshold, min_confidence=min_confidence).full()


def relabelled(scores: np.ndarray, geometry: Geometry, spec: ModelSpec, *, threshold: float | None = None,
               min_confidence: float | None = None) -> LabelMap:
    """Labels decided anew from kept probabilities (relabel_scores says how)."""
    if spec.output.kind in ("binary", "anomaly"):
        cut = spec.output.threshold if threshold is None else threshold
        rule = "at_least" if spec.output.kind == "anomaly" else "above"
        decision = Decision(rule, _float(pp._winning(scores)[None]), geometry, cut)
    else:
        floor_plane = None if min_confidence is None else _float(pp._winning(scores))
        decision = Decision("argmax", _float(scores), geometry, floor=min_confidence, floor_plane=floor_plane)
    return _labels(decision, spec.postprocess)


def _float(planes: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(planes, dtype=np.float32)


def _labels(decision: Decision, post: PostprocessSpec) -> LabelMap:
    """A map that defers the image-sized work when the planes are smaller than the image; when they are not
    (a model working at the image's own size) the mask costs no more than the planes kept for it: made now."""
    hw = decision.geometry.image_hw
    labels = LabelMap(hw, post, decision)
    if decision.planes.shape[1] * decision.planes.shape[2] >= hw[0] * hw[1]:
        return LabelMap(hw, post, mask=labels.full())
    return labels


# --- deciding: the whole image at a size, or a window at full resolution ------------------------------------

def decide(decision: Decision, hw: tuple[int, int]) -> np.ndarray:
    """Uncleaned labels at `hw` (the image's size: exactly the pipeline's mask before `clean_mask`)."""
    geometry = decision.geometry
    if hw != geometry.image_hw:
        geometry = Geometry(hw, geometry.content_hw, geometry.tensor_hw)
    planes = decision.planes
    strided = planes.shape[1:] != geometry.tensor_hw
    if decision.rule == "labels":
        if strided:
            return pp._warp_to_image(planes[0], geometry, cv2.INTER_NEAREST)
        return pp._resize_nearest(np.ascontiguousarray(pp._crop(planes, geometry)[0]), hw)
    if decision.rule in ("above", "at_least"):
        plane = pp._plane_to_image(planes[0], geometry)
        return (plane >= decision.cut if decision.rule == "at_least" else plane > decision.cut).view(np.uint8)
    if strided:
        mask = pp.argmax_planes(np.stack([pp._warp_to_image(p, geometry, cv2.INTER_LINEAR) for p in planes]))
    else:
        mask = pp._scores_to_mask(pp._crop(planes, geometry), hw)
    if decision.floor is not None:
        mask[pp._plane_to_image(cast(np.ndarray, decision.floor_plane), geometry) < decision.floor] = 0  # with floor
    return mask


def decide_window(decision: Decision, window: tuple[int, int, int, int]) -> np.ndarray:
    """Uncleaned labels of image rows y0:y1, columns x0:x1 at full resolution, from the planes alone."""
    y0, y1, x0, x1 = window
    g = decision.geometry
    planes = decision.planes
    on_tensor_grid = planes.shape[1:] == g.tensor_hw
    if on_tensor_grid:  # the content only, edges replicated (as the pipeline's crop + resize)
        planes = np.ascontiguousarray(pp._crop(planes, g))
        g = Geometry(g.image_hw, g.content_hw, g.content_hw)
    if decision.rule == "labels" and on_tensor_grid:  # as cv2.resize's nearest: floor(x · src/dst)
        rows = _nearest_index(y0, y1, g.content_hw[0], g.image_hw[0])
        cols = _nearest_index(x0, x1, g.content_hw[1], g.image_hw[1])
        labels: np.ndarray = planes[0][np.ix_(rows, cols)]
        return labels
    interpolation = cv2.INTER_NEAREST if decision.rule == "labels" else cv2.INTER_LINEAR

    def warp(plane: np.ndarray) -> np.ndarray:
        return _warp_window(plane, g, window, interpolation)

    if decision.rule == "labels":
        return warp(planes[0])
    if decision.rule in ("above", "at_least"):
        plane = warp(planes[0])
        return (plane >= decision.cut if decision.rule == "at_least" else plane > decision.cut).view(np.uint8)
    mask = pp.argmax_planes(np.stack([warp(p) for p in planes]))
    if decision.floor is not None:
        mask[warp(cast(np.ndarray, decision.floor_plane)) < decision.floor] = 0  # set with floor
    return mask


def _nearest_index(start: int, stop: int, source: int, target: int) -> np.ndarray:
    step = 1.0 / (target / source)  # as OpenCV computes it (ifx = 1 / inv_scale_x)
    index: np.ndarray = np.minimum(np.floor(np.arange(start, stop) * step).astype(np.intp), source - 1)
    return index


def _warp_window(plane: np.ndarray, g: Geometry, window: tuple[int, int, int, int], interpolation: int) -> np.ndarray:
    """postprocess._warp_to_image for image rows y0:y1, columns x0:x1 only: the same pixel-centre mapping,
    moved by the window's origin."""
    y0, y1, x0, x1 = window
    h, w = plane.shape
    ay = (h / g.tensor_hw[0]) * (g.content_hw[0] / g.image_hw[0])
    ax = (w / g.tensor_hw[1]) * (g.content_hw[1] / g.image_hw[1])
    matrix = np.array([[ax, 0.0, (x0 + 0.5) * ax - 0.5], [0.0, ay, (y0 + 0.5) * ay - 0.5]], np.float64)
    warped: np.ndarray = cv2.warpAffine(np.ascontiguousarray(plane), matrix, (x1 - x0, y1 - y0),
                                        flags=interpolation | cv2.WARP_INVERSE_MAP, borderMode=cv2.BORDER_REPLICATE)
    return warped


def _clean_window(decision: Decision, post: PostprocessSpec, image_hw: tuple[int, int],
                  window: tuple[int, int, int, int]) -> np.ndarray:
    """`clean_mask` of the full image, seen through `window`, from a margin around it alone.

    Closing reaches 2·(kernel // 2) pixels, so the window is decided `reach` pixels wider than where the closing
    must be right. A component smaller than `min_area` spans fewer than `min_area` pixels in each direction: seen
    in the window widened by `min_area`, one that touches a cut edge (not the image's border) and reaches into the
    window is at least `min_area` pixels long, so it stays. Replicating the cut edges outward by `min_area` gives
    exactly those components the extra pixels and leaves every other one as it is; `drop_small_components` then
    removes what the whole image's cleaning removes.
    """
    h, w = image_hw
    y0, y1, x0, x1 = window
    area = post.min_area if post.min_area > 0 else 0
    reach = 2 * (post.close_kernel // 2) + 1 if post.close_kernel > 1 else 0
    wide = _widen(window, area, image_hw)
    decided = _widen(wide, reach, image_hw)
    labels = decide_window(decision, decided)
    if reach:
        labels = pp.close_classes(labels, post.close_kernel)
        oy, ox = wide[0] - decided[0], wide[2] - decided[2]
        labels = labels[oy: oy + wide[1] - wide[0], ox: ox + wide[3] - wide[2]]
    if area:
        top, bottom, left, right = (area if cut else 0 for cut in (wide[0] > 0, wide[1] < h, wide[2] > 0, wide[3] < w))
        padded = cv2.copyMakeBorder(np.ascontiguousarray(labels), top, bottom, left, right, cv2.BORDER_REPLICATE)
        labels = pp.drop_small_components(padded, area)[top: top + labels.shape[0], left: left + labels.shape[1]]
    oy, ox = y0 - wide[0], x0 - wide[2]
    return np.ascontiguousarray(labels[oy: oy + y1 - y0, ox: ox + x1 - x0])


def _widen(window: tuple[int, int, int, int], by: int, image_hw: tuple[int, int]) -> tuple[int, int, int, int]:
    y0, y1, x0, x1 = window
    return max(0, y0 - by), min(image_hw[0], y1 + by), max(0, x0 - by), min(image_hw[1], x1 + by)
