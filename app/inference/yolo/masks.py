"""Instance masks as Ultralytics' `retina_masks=True` makes them (process_mask_native): each box's coefficients
times the prototypes (logits at a quarter of the input), upsampled by their small factor `f` (1, 2 or 4) that
crops the letterbox's padding on whole pixels, the padding cropped, bilinearly resized to the image (PyTorch's
`interpolate`, `align_corners=False`, no antialias), cut at 0 (sigmoid 0.5) and cropped to the box (pixel
columns x0 <= c < x1, rows likewise).

Both bilinear steps are linear, so they are one matrix per axis (image rows × prototype rows, image columns ×
prototype columns); each mask is computed only inside its box, never at the image's size, and only from the
prototype pixels its box's rows and columns draw on (each image pixel weighs a few neighbouring prototype
pixels: the matrices are applied as those few weights, gathered).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from app.inference.model.instances import PixelBox


def instance_masks(protos: np.ndarray, coeffs: np.ndarray, boxes: np.ndarray, image_hw: tuple[int, int],
                   ) -> list[tuple[np.ndarray, PixelBox]]:
    """For each box (image pixels [N, 4], clipped) its mask (bool, the pixel box's rows × columns) and pixel box.
    `protos` [32, mh, mw], `coeffs` [N, 32]."""
    rows, columns = (_Taps.of(matrix) for matrix in _resamplers(protos.shape[1], protos.shape[2], image_hw))
    protos = protos.astype(np.float32, copy=False)
    found = []
    for coeff, box in zip(coeffs.astype(np.float32, copy=False), boxes, strict=True):
        pixel_box = _pixel_box(box, image_hw)
        x0, y0, x1, y1 = pixel_box
        if x1 == x0 or y1 == y0:
            found.append((np.zeros((y1 - y0, x1 - x0), dtype=bool), pixel_box))
            continue
        (p0, p1), (q0, q1) = rows.span(y0, y1), columns.span(x0, x1)
        logit = np.einsum("c,chw->hw", coeff, protos[:, p0:p1, q0:q1])
        mask = columns.apply(rows.apply(logit, y0, y1, p0).T, x0, x1, q0).T > 0
        found.append((mask, pixel_box))
    return found


@dataclass(frozen=True)
class _Taps:
    """One axis's resampling matrix as its few non-zero weights per output pixel (`index`, `weight` [out, taps]):
    applied by gathering, not by a matrix product over every prototype pixel. Numpy's BLAS would start its
    threads for each box's product, and on a loaded machine, beside ONNX Runtime's own threads, waking them costs
    10-40× the arithmetic."""

    index: np.ndarray
    weight: np.ndarray

    @classmethod
    def of(cls, matrix: np.ndarray) -> _Taps:
        weighed = matrix != 0
        first = weighed.argmax(1)
        taps = max(int((matrix.shape[1] - weighed[:, ::-1].argmax(1) - first).max()), 1)
        index = np.minimum(first[:, None] + np.arange(taps), matrix.shape[1] - 1)
        weight = np.where(first[:, None] + np.arange(taps) < matrix.shape[1],
                          np.take_along_axis(matrix, index, 1), 0).astype(np.float32)
        return cls(index, weight)

    def span(self, start: int, stop: int) -> tuple[int, int]:
        """The prototype pixels output pixels start..stop-1 draw on (end-exclusive)."""
        index = self.index[start:stop]
        return int(index.min()), int(index.max()) + 1

    def apply(self, values: np.ndarray, start: int, stop: int, offset: int) -> np.ndarray:
        """Output pixels start..stop-1 along the first axis of `values` (whose first row is prototype pixel
        `offset`): [stop - start, ...]."""
        index, weight = self.index[start:stop] - offset, self.weight[start:stop]
        out: np.ndarray = values[index[:, 0]] * weight[:, :1]
        for tap in range(1, index.shape[1]):
            out += values[index[:, tap]] * weight[:, tap:tap + 1]
        return out


def _resamplers(mh: int, mw: int, image_hw: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """The row and column matrices from prototype pixels to image pixels (process_mask_native then scale_masks)."""
    h, w = image_hw
    gain = min(4 * mh / h, 4 * mw / w)
    pad = (4 * mh - max(round(h * gain), 1)) | (4 * mw - max(round(w * gain), 1))
    f = 4 // math.gcd(4, pad | pad // 2)
    up_h, up_w = mh * f, mw * f
    if (up_h, up_w) == (h, w):  # scale_masks returns a mask of the image's size as it is
        return _bilinear(mh, up_h).astype(np.float32), _bilinear(mw, up_w).astype(np.float32)
    gain2 = min(up_h / h, up_w / w)
    pad_w, pad_h = (up_w - max(round(w * gain2), 1)) / 2, (up_h - max(round(h * gain2), 1)) / 2
    top, left = round(pad_h - 0.1), round(pad_w - 0.1)
    bottom, right = top + max(round(h * gain2), 1), left + max(round(w * gain2), 1)
    rows = _bilinear(bottom - top, h) @ _bilinear(mh, up_h)[top:bottom]
    columns = _bilinear(right - left, w) @ _bilinear(mw, up_w)[left:right]
    return rows.astype(np.float32), columns.astype(np.float32)  # composed in float64, applied in float32 as theirs


def _bilinear(size_in: int, size_out: int) -> np.ndarray:
    """[size_out, size_in]: PyTorch's bilinear resize along one axis (align_corners=False, source index
    (i + 0.5) · in/out − 0.5, below 0 taken as 0, the last sample repeated past the end)."""
    matrix = np.zeros((size_out, size_in), dtype=np.float64)
    if size_in == size_out:
        np.fill_diagonal(matrix, 1.0)
        return matrix
    scale = size_in / size_out
    source = np.maximum((np.arange(size_out) + 0.5) * scale - 0.5, 0.0)
    low = np.minimum(source.astype(np.int64), size_in - 1)
    high = np.minimum(low + 1, size_in - 1)
    weight = source - low
    np.add.at(matrix, (np.arange(size_out), low), 1.0 - weight)
    np.add.at(matrix, (np.arange(size_out), high), weight)
    return matrix


def _pixel_box(box: np.ndarray, image_hw: tuple[int, int]) -> PixelBox:
    """The whole pixels a box crops (crop_mask: c >= x0 and c < x1), end-exclusive, inside the image."""
    h, w = image_hw
    x0, y0 = (min(max(math.ceil(float(v)), 0), limit) for v, limit in ((box[0], w), (box[1], h)))
    x1, y1 = (min(max(math.ceil(float(v)), 0), limit) for v, limit in ((box[2], w), (box[3], h)))
    return x0, y0, max(x0, x1), max(y0, y1)
