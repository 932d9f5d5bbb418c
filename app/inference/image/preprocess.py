"""Pure preprocessing: an image array becomes the model's input tensor, plus the geometry to undo it.

Order: resize (area when shrinking, linear when enlarging) → colour conversion → zero padding at the
bottom/right (letterbox and size divisor) → `(pixel * scale - mean) / std` through one lookup table per
channel → NCHW/NHWC with a batch axis, in the model's dtype. Resizing first keeps the costly steps on the
smaller array.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import cv2
import numpy as np

from app.inference.model.spec import InputSpec


@dataclass(frozen=True)
class Geometry:
    """Where the image sits inside the tensor: `content_hw` at the top-left of `tensor_hw`."""

    image_hw: tuple[int, int]
    content_hw: tuple[int, int]
    tensor_hw: tuple[int, int]


def preprocess(spec: InputSpec, image: np.ndarray) -> tuple[np.ndarray, Geometry]:
    """`image` is uint8 HxW (gray) or HxWx3 (RGB). Returns the batch-of-one tensor and its geometry."""
    image_hw = (int(image.shape[0]), int(image.shape[1]))
    canvas_hw, content_hw = target_size(spec, image_hw)
    pixels = resize(image, content_hw)
    pixels = convert_color(pixels, spec.color)
    tensor_hw = (_round_up(canvas_hw[0], spec.size_divisor), _round_up(canvas_hw[1], spec.size_divisor))
    pixels = pad_bottom_right(pixels, tensor_hw)
    tensor = to_tensor(spec, pixels)
    return tensor, Geometry(image_hw, content_hw, tensor_hw)


def target_size(spec: InputSpec, image_hw: tuple[int, int]) -> tuple[tuple[int, int], tuple[int, int]]:
    """(canvas, content) sizes: the canvas is what the model sees before divisor padding."""
    if spec.size is None:
        return image_hw, image_hw
    if spec.resize == "stretch":
        return spec.size, spec.size
    scale = min(spec.size[0] / image_hw[0], spec.size[1] / image_hw[1])
    content = (max(1, min(spec.size[0], round(image_hw[0] * scale))),
               max(1, min(spec.size[1], round(image_hw[1] * scale))))
    return spec.size, content


def resize(image: np.ndarray, hw: tuple[int, int]) -> np.ndarray:
    if (image.shape[0], image.shape[1]) == hw:
        return image
    shrinking = hw[0] * hw[1] < image.shape[0] * image.shape[1]
    return cv2.resize(image, (hw[1], hw[0]), interpolation=cv2.INTER_AREA if shrinking else cv2.INTER_LINEAR)


def convert_color(pixels: np.ndarray, color: str) -> np.ndarray:
    is_gray = pixels.ndim == 2
    if color == "gray":
        return pixels if is_gray else cv2.cvtColor(pixels, cv2.COLOR_RGB2GRAY)
    if is_gray:
        return cv2.cvtColor(pixels, cv2.COLOR_GRAY2RGB)  # same for BGR: all channels are equal
    return pixels if color == "rgb" else pixels[:, :, ::-1]


def pad_bottom_right(pixels: np.ndarray, hw: tuple[int, int]) -> np.ndarray:
    bottom, right = hw[0] - pixels.shape[0], hw[1] - pixels.shape[1]
    if bottom == 0 and right == 0:
        return pixels
    return cv2.copyMakeBorder(pixels, 0, bottom, 0, right, cv2.BORDER_CONSTANT, value=0)


def to_tensor(spec: InputSpec, pixels: np.ndarray) -> np.ndarray:
    if spec.layout == "NCHW" and spec.dtype == "float32":
        return _to_nchw_float(spec, pixels)
    hwc = pixels if pixels.ndim == 3 else pixels[:, :, None]
    if spec.dtype == "uint8":
        values = hwc
    else:
        lut = _lookup_table(spec.scale, spec.mean, spec.std)
        values = cv2.LUT(np.ascontiguousarray(hwc), lut[:, :, : hwc.shape[2]])
        if values.ndim == 2:  # cv2 drops a single channel axis
            values = values[:, :, None]
        if spec.dtype == "float16":
            values = values.astype(np.float16)
    if spec.layout == "NCHW":
        values = values.transpose(2, 0, 1)
    return np.ascontiguousarray(values[None])


def _to_nchw_float(spec: InputSpec, pixels: np.ndarray) -> np.ndarray:
    """The common case, plane by plane: each uint8 channel goes through its lookup table straight into its plane
    of the output. Same values as LUT + transpose, and OpenCV releases the GIL where numpy's strided transpose
    copy held it for a few ms per image (felt as event-loop stalls in the viewer during Run on all)."""
    lut = _lookup_table(spec.scale, spec.mean, spec.std)
    planes = cv2.split(pixels) if pixels.ndim == 3 else [pixels]
    out = np.empty((1, len(planes), pixels.shape[0], pixels.shape[1]), np.float32)
    for c, plane in enumerate(planes):
        cv2.LUT(plane, np.ascontiguousarray(lut[:, :, c]), dst=out[0, c])
    return out


@lru_cache(maxsize=16)
def _lookup_table(scale: float, mean: tuple[float, ...], std: tuple[float, ...]) -> np.ndarray:
    """(256, 1, C) float32: the normalised value of every uint8 level for each channel."""
    levels = np.arange(256, dtype=np.float64)[:, None]
    table = (levels * scale - np.asarray(mean)[None, :]) / np.asarray(std)[None, :]
    levels_table: np.ndarray = table.astype(np.float32)[:, None, :]
    return levels_table


def _round_up(value: int, divisor: int) -> int:
    return -(-value // divisor) * divisor
