"""How the inference worker turns a pipeline Result into what the window shows (a ViewResult): display-sized copies,
the verdict and the probability/uncertainty layer at the reader's Tuning. Called on the worker's thread; no Qt."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.ui.messages import Tuning, ViewRequest, ViewResult

MAX_DISPLAY_SIDE = 8192  # larger images get a downscaled display copy; results stay at full resolution


def display_mask(mask, view: ViewResult):
    """`mask` at the display size of `view` (the mask itself unless the display copy is downscaled)."""
    if mask is None or view.display_scale == 1.0:
        return mask
    import cv2

    height, width = view.display_pixels.shape[:2]
    return cv2.resize(mask, (width, height), interpolation=cv2.INTER_NEAREST)


def decided(view: ViewResult, tuning: Tuning, spec) -> ViewResult:
    """`view` with its verdict at the tuning's score limit and, in a probability/uncertainty layer, that picture
    as 0–255 levels at the display size."""
    from app.inference.tuning import judge, plane, with_score_limit

    levels = None
    if tuning.layer != "mask":
        picture = plane(view.result, spec, tuning.layer, tuning.class_index)
        if picture is not None:
            import cv2

            from app.io.render import probability_levels

            height, width = view.display_pixels.shape[:2]
            if picture.shape != (height, width):
                picture = cv2.resize(picture, (width, height), interpolation=cv2.INTER_AREA)
            levels = probability_levels(picture)
    judgement = judge(with_score_limit(spec, tuning.score_limit), view.result)
    return replace(view, tuning=tuning, display_levels=levels, judgement=judgement, display_codes=None)


def view_result(request: ViewRequest, result, image) -> ViewResult:
    """The result with display-sized copies: images longer than MAX_DISPLAY_SIDE are downscaled for the screen."""
    import cv2

    from app.ui.messages import ViewResult

    pixels = image.display()
    height, width = pixels.shape[:2]
    extra = {"window": image.window, "invert": image.invert, "info": dict(image.info),
             "frame_count": image.frame_count, "generation": request.generation}
    scale = max(height, width) / MAX_DISPLAY_SIDE
    if scale <= 1.0:
        return ViewResult(request.key, result, pixels, result.mask, 1.0, image.raw, **extra)
    size = (max(1, round(width / scale)), max(1, round(height / scale)))
    display = cv2.resize(pixels, size, interpolation=cv2.INTER_AREA)
    mask = None if result.mask is None else cv2.resize(result.mask, size, interpolation=cv2.INTER_NEAREST)
    raw = None if image.raw is None else cv2.resize(image.raw, size, interpolation=cv2.INTER_AREA)
    return ViewResult(request.key, result, display, mask, width / size[0], raw, full_pixels=pixels, **extra)
