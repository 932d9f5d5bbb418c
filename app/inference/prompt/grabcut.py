"""The model-free fallback for boxes: OpenCV's grabCut inside the box, for when no prompt model is configured.

It answers as a PromptSession does (`embed`, then `decode` per prompt), so the editor, the CLI and the folder run
take either. Points refine a box (positive: sure foreground, negative: sure background); points alone are refused.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING, Any

import cv2
import numpy as np

from app.inference.prompt.cache import Embedding, image_identity
from app.inference.prompt.frame import as_rgb8, frame_geometry, image_to_low_res
from app.inference.prompt.request import (
    NEGATIVE,
    Box,
    Point,
    PromptAbout,
    PromptError,
    Proposal,
    check_prompt,
    prompt_image_shape,
)

if TYPE_CHECKING:
    from app.inference.prompt.request import PromptModel

ITERATIONS = 5  # grabCut's own examples use 5; more changes little on a box
_SEED_RADIUS = 3  # pixels around a point marked sure foreground / background
_MIN_MARGIN = 16  # pixels of background context around a box, at least
WORK_SIDE = 400  # grabCut works on the box's surroundings at most this many pixels a side


class GrabCutSession:
    """grabCut with the PromptSession interface: `embed` keeps the 8-bit RGB image, `decode` segments a box."""

    name = "grabcut"

    def __init__(self, *, iterations: int = ITERATIONS) -> None:
        self.iterations = iterations
        self.encoder_runs = 0  # no encoder: kept for the same interface

    @property
    def model_free(self) -> bool:
        """True: OpenCV on the picture, no model."""
        return True

    def about(self) -> PromptAbout:
        """'grabCut', running nowhere in particular (OpenCV on the CPU)."""
        return PromptAbout("grabCut")

    def warm_up(self) -> None:
        """Nothing: no model to warm up."""

    def embed(self, image: np.ndarray, *, key: Hashable | None = None, run_options: Any | None = None) -> Embedding:
        """The image as grabCut takes it (8-bit, 3 channels); no model runs (`run_options` is not used)."""
        if not prompt_image_shape(image.shape):
            raise PromptError(f"grabcut takes an HxW or HxWx3 image, got shape {list(image.shape)}")
        rgb = np.ascontiguousarray(as_rgb8(image))
        hw = (int(image.shape[0]), int(image.shape[1]))
        return Embedding((key if key is not None else image_identity(image), "grabcut"), {"image": rgb},
                         frame_geometry(hw, 1024))

    def cached(self, key: Hashable) -> bool:
        """False: grabCut keeps no embeddings (`embed` only converts the picture)."""
        return False

    def device_warning(self) -> str | None:
        """None: grabCut runs no model (OpenCV on the CPU, as asked or not)."""
        return None

    def decode(self, embedding: Embedding, points: Sequence[Point] = (), box: Box | None = None,
               mask_input: np.ndarray | None = None) -> Proposal:
        """grabCut initialised with the box (and the points as sure seeds); `mask_input` is not used."""
        box = check_prompt(points, box, embedding.geometry.image_hw)
        if box is None:
            raise PromptError("grabcut needs a box (without a prompt model, points only refine a box)")
        image = embedding.tensors["image"]
        x0, y0 = int(np.floor(box.x0)), int(np.floor(box.y0))
        x1, y1 = int(np.ceil(box.x1)), int(np.ceil(box.y1))
        # grabCut learns the background from a margin around the box, not the whole image: a box on a 20 MP
        # photo costs what it costs on a thumbnail
        (cx0, cy0, cx1, cy1) = _around((x0, y0, x1, y1), image.shape[:2])
        # and a big crop is segmented at most WORK_SIDE pixels a side (a 1300² box took ~10 s at full size,
        # ~0.3 s so), its mask brought back bilinearly: grabCut's colour models need no more pixels than that
        scale = min(1.0, WORK_SIDE / max(cx1 - cx0, cy1 - cy0))
        size = (max(1, round((cx1 - cx0) * scale)), max(1, round((cy1 - cy0) * scale)))
        crop = np.full((size[1], size[0]), cv2.GC_BGD, np.uint8)  # sure background outside the box
        bx0, by0 = int((x0 - cx0) * scale), int((y0 - cy0) * scale)
        bx1, by1 = max(bx0 + 1, round((x1 - cx0) * scale)), max(by0 + 1, round((y1 - cy0) * scale))
        crop[by0:by1, bx0:bx1] = cv2.GC_PR_FGD
        for point in points:
            value = cv2.GC_BGD if point.label == NEGATIVE else cv2.GC_FGD
            cv2.circle(crop, (int((point.x - cx0) * scale), int((point.y - cy0) * scale)), _SEED_RADIUS, int(value),
                       -1)
        if not np.any(crop == cv2.GC_BGD):
            raise PromptError(f"grabcut: the box ({x0}, {y0}, {x1}, {y1}) leaves no background to learn from "
                              "(it covers the whole image)")
        pixels = np.ascontiguousarray(image[cy0:cy1, cx0:cx1])
        if scale < 1.0:
            pixels = cv2.resize(pixels, size, interpolation=cv2.INTER_AREA)
        background, foreground = np.zeros((1, 65), np.float64), np.zeros((1, 65), np.float64)
        try:
            cv2.grabCut(pixels, crop, (0, 0, 0, 0), background, foreground, self.iterations, cv2.GC_INIT_WITH_MASK)
        except cv2.error as exc:
            raise PromptError(f"grabcut failed on the box ({x0}, {y0}, {x1}, {y1}): "
                              f"{str(exc).strip().splitlines()[-1][:200]}") from exc
        inside = ((crop == cv2.GC_FGD) | (crop == cv2.GC_PR_FGD)).astype(np.uint8)
        if scale < 1.0:
            inside = cv2.resize(inside * 255, (cx1 - cx0, cy1 - cy0), interpolation=cv2.INTER_LINEAR) >= 128
        found = np.zeros(image.shape[:2], bool)
        found[cy0:cy1, cx0:cx1] = inside
        found[:y0], found[y1:], found[:, :x0], found[:, x1:] = False, False, False, False  # the box bounds it
        return Proposal(mask=found, iou=float("nan"), low_res=image_to_low_res(found, embedding.geometry))


if TYPE_CHECKING:
    _IMPLEMENTS: type[PromptModel] = GrabCutSession  # mypy (.ci/run) proves grabCut is a PromptModel


def _around(box: tuple[int, int, int, int], hw: tuple[int, ...]) -> tuple[int, int, int, int]:
    """The box grown by a quarter of its longer side (at least 16 pixels) each way, inside the image."""
    x0, y0, x1, y1 = box
    margin = max(_MIN_MARGIN, (max(x1 - x0, y1 - y0) + 3) // 4)
    return max(x0 - margin, 0), max(y0 - margin, 0), min(x1 + margin, int(hw[1])), min(y1 + margin, int(hw[0]))
