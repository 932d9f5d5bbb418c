"""The pure maths between an image and a prompt encoder's square frame (no session, tiny arrays in tests).

SAM (segment-anything `ResizeLongestSide`): the longest side is resized to the frame (1024), the other to
`int(side · scale + 0.5)`, the image normalised with mean/std on 0..255 and padded with zeros (after
normalisation) bottom/right; a point (x, y) in image pixels goes to (x · new_w / w, y · new_h / h) — no +0.5 here:
both decoders add the pixel-centre half themselves (SAM's prompt encoder, samexporter's `_embed_points`).
`stretch` (samexporter's SAM2 inference, SAM2's `SAM2Transforms`) resizes to frame × frame instead. Low-res masks
(256×256 over the frame) come back by SAM's postprocessing: bilinear to the frame, crop to the unpadded area,
bilinear to the image.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

MASK_GRID = 256  # the decoders' low-res mask and mask_input grid (frame / 4)


@dataclass(frozen=True)
class FrameGeometry:
    """Where an image of `image_hw` lies in the encoder's `frame` × `frame` input: top-left, `resized_hw`."""

    image_hw: tuple[int, int]
    frame: int
    resized_hw: tuple[int, int]

    @property
    def scale_xy(self) -> tuple[float, float]:
        """Frame pixels per image pixel along x and y (SAM's apply_coords: new_w / w, new_h / h)."""
        return self.resized_hw[1] / self.image_hw[1], self.resized_hw[0] / self.image_hw[0]


def frame_geometry(image_hw: tuple[int, int], frame: int, *, resize: str = "longest") -> FrameGeometry:
    """SAM's `get_preprocess_shape` (longest side to `frame`, the other rounded half up) or a stretch."""
    h, w = image_hw
    if resize == "stretch":
        return FrameGeometry(image_hw, frame, (frame, frame))
    scale = frame / max(h, w)
    # at least one row: a 1×5000 image's 0.2048 rounds to none (SAM's own rounding; cv2.resize refuses a 0 side)
    return FrameGeometry(image_hw, frame, (max(1, int(h * scale + 0.5)), max(1, int(w * scale + 0.5))))


def encoder_tensor(image: np.ndarray, geometry: FrameGeometry, *, mean: tuple[float, float, float],
                   std: tuple[float, float, float]) -> np.ndarray:
    """An HxW or HxWx3 (RGB) image → float32 [1, 3, frame, frame]: resized, normalised (0..255 mean/std), padded
    with zeros bottom/right (SAM pads the normalised image)."""
    rgb = as_rgb8(image)
    nh, nw = geometry.resized_hw
    # INTER_LINEAR as SAM's PIL bilinear resize; INTER_AREA would be better when shrinking but differs from SAM
    resized = cv2.resize(rgb, (nw, nh), interpolation=cv2.INTER_LINEAR).astype(np.float32)
    normalised = (resized - np.asarray(mean, np.float32)) / np.asarray(std, np.float32)
    tensor = np.zeros((1, 3, geometry.frame, geometry.frame), np.float32)
    tensor[0, :, :nh, :nw] = normalised.transpose(2, 0, 1)
    return tensor


def as_rgb8(image: np.ndarray) -> np.ndarray:
    """HxW, HxWx1 (gray), HxWx3 or HxWx4 (alpha dropped) → HxWx3 8-bit (as_8bit)."""
    rgb = image[:, :, :3] if image.ndim == 3 and image.shape[2] >= 3 else \
        np.repeat(image.reshape(*image.shape[:2], 1), 3, axis=2)
    return as_8bit(rgb)


def as_8bit(image: np.ndarray) -> np.ndarray:
    """uint8 as is; other dtypes stretched min..max to 0..255 (a 16-bit or float image, as the viewer shows it)."""
    if image.dtype == np.uint8:
        return image
    values = image.astype(np.float64)
    finite = values[np.isfinite(values)]  # ±inf would make the span inf and every pixel 0
    low, high = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    span = high - low if high > low else 1.0
    values = np.nan_to_num(values, nan=low, posinf=high, neginf=low)
    return np.clip((values - low) * (255.0 / span), 0, 255).astype(np.uint8)


def frame_points(points_xy: np.ndarray, geometry: FrameGeometry) -> np.ndarray:
    """Image-pixel (x, y) points [N, 2] → frame coordinates [N, 2] float32 (SAM's apply_coords)."""
    sx, sy = geometry.scale_xy
    out: np.ndarray = np.asarray(points_xy, np.float64).reshape(-1, 2) * np.array([sx, sy])
    return out.astype(np.float32)


def low_res_to_image(low_res: np.ndarray, geometry: FrameGeometry) -> np.ndarray:
    """A low-res logit map [256, 256] over the frame → logits at the image's size (float32), as SAM's
    `postprocess_masks`: bilinear to the frame, crop the padding away, bilinear to the image."""
    frame = geometry.frame
    up = cv2.resize(low_res.astype(np.float32), (frame, frame), interpolation=cv2.INTER_LINEAR)
    nh, nw = geometry.resized_hw
    h, w = geometry.image_hw
    return cv2.resize(up[:nh, :nw], (w, h), interpolation=cv2.INTER_LINEAR)


def image_to_low_res(mask: np.ndarray, geometry: FrameGeometry, *, logit: float = 8.0) -> np.ndarray:
    """A boolean image-size mask → a low-res [256, 256] logit map over the frame (±`logit`, padding negative):
    the `mask_input` for a slice the accepted mask is carried to."""
    nh, nw = geometry.resized_hw
    in_frame = np.full((geometry.frame, geometry.frame), -logit, np.float32)
    resized = cv2.resize(mask.astype(np.float32), (nw, nh), interpolation=cv2.INTER_LINEAR)
    in_frame[:nh, :nw] = np.where(resized >= 0.5, logit, -logit)
    return cv2.resize(in_frame, (MASK_GRID, MASK_GRID), interpolation=cv2.INTER_AREA)
