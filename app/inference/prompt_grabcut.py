"""The model-free fallback for boxes: OpenCV's grabCut inside the box, for when no prompt model is configured.

It answers as a PromptSession does (`embed`, then `decode` per prompt), so the editor, the CLI and the folder run
take either. Points refine a box (positive: sure foreground, negative: sure background); points alone are refused.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import cv2
import numpy as np

from app.inference.prompt_cache import Embedding, image_identity
from app.inference.prompt_frame import as_rgb8, frame_geometry, image_to_low_res
from app.inference.prompt_input import NEGATIVE, Box, Point, PromptError, Proposal, check_prompt, prompt_image_shape

ITERATIONS = 5  # grabCut's own examples use 5; more changes little on a box
_SEED_RADIUS = 3  # pixels around a point marked sure foreground / background
_MIN_MARGIN = 16  # pixels of background context around a box, at least


class GrabCutSession:
    """grabCut with the PromptSession interface: `embed` keeps the 8-bit RGB image, `decode` segments a box."""

    name = "grabcut"

    def __init__(self, *, iterations: int = ITERATIONS) -> None:
        self.iterations = iterations
        self.encoder_runs = 0  # no encoder: kept for the same interface

    def embed(self, image: np.ndarray, *, key: Hashable | None = None) -> Embedding:
        """The image as grabCut takes it (8-bit, 3 channels); no model runs."""
        if not prompt_image_shape(image.shape):
            raise PromptError(f"grabcut takes an HxW or HxWx3 image, got shape {list(image.shape)}")
        rgb = np.ascontiguousarray(as_rgb8(image))
        hw = (int(image.shape[0]), int(image.shape[1]))
        return Embedding((key if key is not None else image_identity(image), "grabcut"), {"image": rgb},
                         frame_geometry(hw, 1024))

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
        mask = np.zeros(image.shape[:2], np.uint8)  # GC_BGD outside the box
        mask[y0:y1, x0:x1] = cv2.GC_PR_FGD
        for point in points:
            value = cv2.GC_BGD if point.label == NEGATIVE else cv2.GC_FGD
            cv2.circle(mask, (int(point.x), int(point.y)), _SEED_RADIUS, int(value), -1)
        crop = mask[cy0:cy1, cx0:cx1].copy()  # a copy even when it is the whole mask: the mask is cleared below
        if not np.any(crop == cv2.GC_BGD):
            raise PromptError(f"grabcut: the box ({x0}, {y0}, {x1}, {y1}) leaves no background to learn from "
                              "(it covers the whole image)")
        background, foreground = np.zeros((1, 65), np.float64), np.zeros((1, 65), np.float64)
        try:
            cv2.grabCut(np.ascontiguousarray(image[cy0:cy1, cx0:cx1]), crop, (0, 0, 0, 0), background, foreground,
                        self.iterations, cv2.GC_INIT_WITH_MASK)
        except cv2.error as exc:
            raise PromptError(f"grabcut failed on the box ({x0}, {y0}, {x1}, {y1}): "
                              f"{str(exc).strip().splitlines()[-1][:200]}") from exc
        mask[:] = cv2.GC_BGD
        mask[cy0:cy1, cx0:cx1] = crop
        found = (mask == cv2.GC_FGD) | (mask == cv2.GC_PR_FGD)
        return Proposal(mask=found, iou=float("nan"), low_res=image_to_low_res(found, embedding.geometry))


def _around(box: tuple[int, int, int, int], hw: tuple[int, ...]) -> tuple[int, int, int, int]:
    """The box grown by a quarter of its longer side (at least 16 pixels) each way, inside the image."""
    x0, y0, x1, y1 = box
    margin = max(_MIN_MARGIN, (max(x1 - x0, y1 - y0) + 3) // 4)
    return max(x0 - margin, 0), max(y0 - margin, 0), min(x1 + margin, int(hw[1])), min(y1 + margin, int(hw[0]))
