"""How the inference worker turns a pipeline Result into what the window shows (a ViewResult): display-sized copies,
the verdict and the probability/uncertainty layer at the reader's Tuning. Called on the worker's thread; no Qt."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

    from app.inference.image.pipeline import Result
    from app.inference.model.spec import ModelSpec
    from app.io.decoded import DecodedImage
    from app.ui.state.messages import BarePicture, Tuning, ViewKey, ViewRequest, ViewResult

    Labels = tuple[np.ndarray | None, np.ndarray | None]  # (labels at a display size, pixels per label value)

MAX_DISPLAY_SIDE = 8192  # larger images get a downscaled display copy; results stay at full resolution


def display_labels(result: Result, view: ViewResult) -> Labels:
    """(labels at the display size of `view`, pixel counts per label value at the image's size) of `result`'s
    segmentation; (None, None) for classification. See `_labels_at`."""
    height, width = view.display_pixels.shape[:2]
    return _labels_at(result, (height, width), view.display_scale)


def _labels_at(result: Result, hw: tuple[int, int], scale: float) -> Labels:
    """A downscaled display gets labels decided at its own size (labelmap.LabelMap.at_size): the image-sized mask
    is not made for the overview. Its counts are then the display's, each pixel standing for the image pixels it
    covers (labelmap.estimated_counts); exact once the full mask exists (made for an area rule, a reference…)."""
    if result.labels is None:
        return None, None
    if scale == 1.0:
        return result.mask, result.class_pixels()
    from app.inference.image.labelmap import estimated_counts

    mask = result.labels.at_size(hw)
    counts = result.class_pixels() if result.labels.ready else estimated_counts(mask, result.image_hw)
    return mask, counts


def settled(view: ViewResult) -> ViewResult:
    """`view` with its display labels and counts taken from the image-sized mask when something on the way made it
    (a reference, an area rule, model B's agreement): exact counts, and the display copy of what was measured —
    the same, nearest, as model B's beside it."""
    labels = view.result.labels
    if labels is None or view.display_scale == 1.0 or not labels.ready:
        return view
    mask, counts = display_labels(view.result, view)
    return replace(view, display_mask=mask, class_counts=counts)


def display_mask(mask: np.ndarray | None, view: ViewResult) -> np.ndarray | None:
    """`mask` at the display size of `view` (the mask itself unless the display copy is downscaled)."""
    if mask is None or view.display_scale == 1.0:
        return mask
    import cv2

    height, width = view.display_pixels.shape[:2]
    return cv2.resize(mask, (width, height), interpolation=cv2.INTER_NEAREST)


def decided(view: ViewResult, tuning: Tuning, spec: ModelSpec) -> ViewResult:
    """`view` with its verdict at the tuning's score limit and, in a probability/uncertainty layer, that picture
    as 0–255 levels at the display size."""
    from app.inference.decide.tuning import judge, plane, with_score_limit

    levels = None
    if tuning.layer != "mask":
        height, width = view.display_pixels.shape[:2]
        picture = plane(view.result, spec, tuning.layer, tuning.class_index, hw=(height, width))
        if picture is not None:
            import cv2

            from app.io.render import probability_levels

            if picture.shape != (height, width):
                picture = cv2.resize(picture, (width, height), interpolation=cv2.INTER_AREA)
            levels = probability_levels(picture)
    judgement = judge(with_score_limit(spec, tuning.score_limit), at_score(view.result, tuning.threshold))
    return replace(view, tuning=tuning, display_levels=levels, judgement=judgement, display_codes=None)


def at_score(result: Result, threshold: float | None) -> Result:
    """An instance model's result as the reader's score threshold shows it (its weaker instances left out, its
    image score the best of the rest), to be judged; any other result as it is. The view keeps every instance: a
    lower threshold shows them again without a run."""
    if result.instances is None or threshold is None:
        return result
    kept = result.instances.above(threshold)
    return replace(result, instances=kept, image_score=max((i.score for i in kept.items), default=0.0))


def bare_picture(key: ViewKey, image: DecodedImage) -> BarePicture:
    """The picture's display copy alone (its run failed, or waits on a server), downscaled as view_result's."""
    import cv2

    from app.ui.state.messages import BarePicture

    pixels = image.display()
    height, width = pixels.shape[:2]
    scale = max(height, width) / MAX_DISPLAY_SIDE
    if scale > 1.0:
        size = (max(1, round(width / scale)), max(1, round(height / scale)))
        pixels = cv2.resize(pixels, size, interpolation=cv2.INTER_AREA)
    return BarePicture(key, pixels, (height, width))


def view_result(request: ViewRequest, result: Result, image: DecodedImage) -> ViewResult:
    """The result with display-sized copies: images longer than MAX_DISPLAY_SIDE are downscaled for the screen."""
    import cv2

    from app.ui.state.messages import ViewResult

    pixels = image.display()
    height, width = pixels.shape[:2]
    display, raw, full, hw = pixels, image.raw, None, (height, width)
    scale = max(height, width) / MAX_DISPLAY_SIDE
    if scale > 1.0:
        size = (max(1, round(width / scale)), max(1, round(height / scale)))
        display = cv2.resize(pixels, size, interpolation=cv2.INTER_AREA)
        raw = None if image.raw is None else cv2.resize(image.raw, size, interpolation=cv2.INTER_AREA)
        full, hw = pixels, (size[1], size[0])
    display_scale = width / hw[1]  # 1.0 unless downscaled
    mask, counts = _labels_at(result, hw, display_scale)
    return ViewResult(request.key, result, display, mask, display_scale, raw, window=image.window,
                      invert=image.invert, info=dict(image.info), frame_count=image.frame_count,
                      generation=request.generation, full_pixels=full, class_counts=counts,
                      request_id=request.request_id)
