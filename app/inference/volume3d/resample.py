"""Trilinear resampling of volumes with half-pixel centres, equal to torch.nn.functional.interpolate(mode="trilinear",
align_corners=False) (tests/inference/volume3d/test_volume3d_resample.py), in numpy and OpenCV only.

Separable: each source slice is resized in-plane with cv2.resize (INTER_LINEAR uses the same half-pixel mapping and
border clamp as torch), and output slice d mixes the two resized source slices around its centre. Slices are made
one at a time and at most two resized source slices are held, so resampling needs no copy of the volume beyond its
output; a `source(k)` function gives slice k (already normalised, say) so the input need not be float32 either.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import cv2
import numpy as np

from app.inference.image.half import write_half

Shape3 = tuple[int, int, int]
SliceSource = Callable[[int], np.ndarray]  # k → [C, H, W] float32: source slice k


def axis_weights(size_in: int, size_out: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each output index along one axis: the two source indices and the second one's weight (torch's
    `area_pixel_compute_source_index`: src = (dst + 0.5) × in/out − 0.5, clamped to 0, upper index clamped)."""
    scale = size_in / size_out
    source = np.maximum((np.arange(size_out, dtype=np.float64) + 0.5) * scale - 0.5, 0.0)
    low = np.minimum(np.floor(source).astype(np.int64), size_in - 1)
    high = np.minimum(low + 1, size_in - 1)
    fraction = np.where(high > low, np.clip(source - low, 0.0, 1.0), 0.0).astype(np.float32)
    return low, high, fraction


def resize_plane(plane: np.ndarray, hw: tuple[int, int]) -> np.ndarray:
    """One 2-D float32 plane resized bilinearly to (h, w), half-pixel centres."""
    if plane.shape == hw:
        return plane
    return cv2.resize(np.ascontiguousarray(plane), (hw[1], hw[0]), interpolation=cv2.INTER_LINEAR)


def resampled_slices(source: SliceSource, depth: int, shape: Shape3) -> Iterator[tuple[int, np.ndarray]]:
    """(d, [C, h, w] float32) for each output slice d of a volume of `depth` source slices resampled to `shape`."""
    low, high, fraction = axis_weights(depth, shape[0])
    resized: dict[int, np.ndarray] = {}

    def slice_at(k: int) -> np.ndarray:
        if k not in resized:
            for old in [key for key in resized if key < low[d]]:
                del resized[old]  # output slices only move forward: older source slices are not needed again
            planes = np.asarray(source(k), np.float32)
            resized[k] = np.stack([resize_plane(plane, (shape[1], shape[2])) for plane in planes])
        return resized[k]

    for d in range(shape[0]):
        first, weight = slice_at(int(low[d])), float(fraction[d])
        if weight == 0.0 or high[d] == low[d]:
            yield d, first
            continue
        second = slice_at(int(high[d]))
        yield d, first * np.float32(1.0 - weight) + second * np.float32(weight)


def resample_into(source: SliceSource, depth: int, out: np.ndarray) -> None:
    """Fill `out` ([C, d, h, w], float32 or float16, possibly a strided view) with the resampled volume."""
    shape = (out.shape[1], out.shape[2], out.shape[3])
    for d, block in resampled_slices(source, depth, shape):
        store(out[:, d], block)


def store(target: np.ndarray, block: np.ndarray) -> None:
    """Write float32 planes [C, h, w] into `target` (float16 through OpenCV: app.inference.image.half)."""
    if target.dtype == np.float16:
        write_half(target, block)
    else:
        target[...] = block


def resample_linear(array: np.ndarray, shape: Shape3, *, dtype: type[np.floating] = np.float32) -> np.ndarray:
    """[C, D, H, W] → [C, *shape] trilinear with half-pixel centres (torch's align_corners=False)."""
    if array.ndim != 4:
        raise ValueError(f"resample_linear wants [C, D, H, W], got shape {array.shape}")
    out = np.empty((array.shape[0], *shape), dtype)
    resample_into(lambda k: array[:, k], array.shape[1], out)
    return out


def spacing_shape(shape: Shape3, spacing: tuple[float, float, float],
                  target: tuple[float, float, float]) -> Shape3:
    """The grid `shape` at `spacing` (mm) takes at `target` spacing: round(size × spacing / target), at least 1
    (nnU-Net's rule)."""
    sizes = [max(1, round(n * s / t)) for n, s, t in zip(shape, spacing, target, strict=True)]
    return sizes[0], sizes[1], sizes[2]
