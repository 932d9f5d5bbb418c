"""Trilinear resampling of volumes on one of two grids — half-voxel centres (torch's) or the first voxel's centre
kept (MONAI's Spacing) — and back, in numpy and OpenCV only.

- "centre" (the default): half-pixel centres, equal to torch.nn.functional.interpolate(mode="trilinear",
  align_corners=False) (tests/inference/volume3d/test_volume3d_resample.py): output voxel i samples the source at
  (i + 0.5) × n_in / n_out − 0.5;
- "corner": MONAI's Spacing (compute_shape_offset with scale_extent False, then grid_sample bilinear, padding
  border): the first voxels' centres coincide and the grid steps by the target spacing, so output voxel i samples
  the source at offset + i × target / spacing, on round((n − 1) × spacing / target + 1) voxels; its inverse (MONAI's
  Invertd) is the same map inverted. Each axis's map is an AxisMap.
Both clamp the sample to the source's first and last voxel.

Separable: each source slice is resized in-plane (centre: cv2.resize, whose INTER_LINEAR uses the same half-pixel
mapping and border clamp as torch; corner: two gathers and a mix per axis), and output slice d mixes the two resized
source slices around its sample. Slices are made one at a time and at most two resized source slices are held, so
resampling needs no copy of the volume beyond its output; a `source(k)` function gives slice k (already normalised,
say) so the input need not be float32 either.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import cv2
import numpy as np

from app.inference.image.half import write_half

Shape3 = tuple[int, int, int]
SliceSource = Callable[[int], np.ndarray]  # k → [C, H, W] float32: source slice k
CORNER_TOLERANCE_MM = 1e-3  # MONAI's AFFINE_TOL: a spacing this close to the target is kept (no resampling)


@dataclass(frozen=True)
class AxisMap:
    """Along one axis, output index i samples the source at `offset + i × step` (clamped to the source)."""

    offset: float
    step: float

    def inverse(self) -> AxisMap:
        """The map back: source index j samples this map's output at (j − offset) / step."""
        return AxisMap(-self.offset / self.step, 1.0 / self.step)


Maps = tuple[AxisMap, AxisMap, AxisMap]  # per axis of the array resampled (D, H, W); None where used: centre grid


def axis_weights(size_in: int, size_out: int, mapping: AxisMap | None = None) -> tuple[np.ndarray, np.ndarray,
                                                                                       np.ndarray]:
    """For each output index along one axis: the two source indices and the second one's weight. Without a
    `mapping`, torch's `area_pixel_compute_source_index` (src = (dst + 0.5) × in/out − 0.5); the sample is clamped
    to [0, size_in − 1] either way (torch's and grid_sample's border)."""
    index = np.arange(size_out, dtype=np.float64)
    source = (index + 0.5) * (size_in / size_out) - 0.5 if mapping is None else index * mapping.step + mapping.offset
    source = np.clip(source, 0.0, size_in - 1)
    low = np.minimum(np.floor(source).astype(np.int64), size_in - 1)
    high = np.minimum(low + 1, size_in - 1)
    fraction = np.where(high > low, np.clip(source - low, 0.0, 1.0), 0.0).astype(np.float32)
    return low, high, fraction


def resize_plane(plane: np.ndarray, hw: tuple[int, int], maps: tuple[AxisMap, AxisMap] | None = None) -> np.ndarray:
    """One 2-D float32 plane resized bilinearly to (h, w): half-pixel centres, or along `maps` (rows, columns)."""
    if maps is not None:
        return _mapped_plane(plane, hw, maps)
    if plane.shape == hw:
        return plane
    return cv2.resize(np.ascontiguousarray(plane), (hw[1], hw[0]), interpolation=cv2.INTER_LINEAR)


def _mapped_plane(plane: np.ndarray, hw: tuple[int, int], maps: tuple[AxisMap, AxisMap]) -> np.ndarray:
    """Columns, then rows: each output sample the two source samples around it, mixed by its weight."""
    out = plane
    for axis in (1, 0):
        low, high, fraction = axis_weights(plane.shape[axis], hw[axis], maps[axis])
        shape = (-1, 1) if axis == 0 else (1, -1)
        weight = fraction.reshape(shape)
        first, second = np.take(out, low, axis=axis), np.take(out, high, axis=axis)
        out = first * (np.float32(1.0) - weight) + second * weight
    return out


def resampled_slices(source: SliceSource, depth: int, shape: Shape3,
                     maps: Maps | None = None) -> Iterator[tuple[int, np.ndarray]]:
    """(d, [C, h, w] float32) for each output slice d of a volume of `depth` source slices resampled to `shape`:
    half-pixel centres, or along `maps` (D, H, W)."""
    low, high, fraction = axis_weights(depth, shape[0], None if maps is None else maps[0])
    in_plane = None if maps is None else (maps[1], maps[2])
    resized: dict[int, np.ndarray] = {}

    def slice_at(k: int) -> np.ndarray:
        if k not in resized:
            for old in [key for key in resized if key < low[d]]:
                del resized[old]  # output slices only move forward: older source slices are not needed again
            planes = np.asarray(source(k), np.float32)
            resized[k] = np.stack([resize_plane(plane, (shape[1], shape[2]), in_plane) for plane in planes])
        return resized[k]

    for d in range(shape[0]):
        first, weight = slice_at(int(low[d])), float(fraction[d])
        if weight == 0.0 or high[d] == low[d]:
            yield d, first
            continue
        second = slice_at(int(high[d]))
        yield d, first * np.float32(1.0 - weight) + second * np.float32(weight)


def resample_into(source: SliceSource, depth: int, out: np.ndarray, maps: Maps | None = None) -> None:
    """Fill `out` ([C, d, h, w], float32 or float16, possibly a strided view) with the resampled volume (half-pixel
    centres, or along `maps`)."""
    shape = (out.shape[1], out.shape[2], out.shape[3])
    for d, block in resampled_slices(source, depth, shape, maps):
        store(out[:, d], block)


def store(target: np.ndarray, block: np.ndarray) -> None:
    """Write float32 planes [C, h, w] into `target` (float16 through OpenCV: app.inference.image.half)."""
    if target.dtype == np.float16:
        write_half(target, block)
    else:
        target[...] = block


def resample_linear(array: np.ndarray, shape: Shape3, *, dtype: type[np.floating] = np.float32,
                    maps: Maps | None = None) -> np.ndarray:
    """[C, D, H, W] → [C, *shape] trilinear with half-pixel centres (torch's align_corners=False), or along
    `maps`."""
    if array.ndim != 4:
        raise ValueError(f"resample_linear wants [C, D, H, W], got shape {array.shape}")
    out = np.empty((array.shape[0], *shape), dtype)
    resample_into(lambda k: array[:, k], array.shape[1], out, maps)
    return out


def spacing_shape(shape: Shape3, spacing: tuple[float, float, float],
                  target: tuple[float, float, float], *, grid: str = "centre") -> Shape3:
    """The grid `shape` at `spacing` (mm) takes at `target` spacing, at least 1 voxel per axis: centre,
    round(size × spacing / target) (nnU-Net's rule); corner, round((size − 1) × spacing / target + 1) (MONAI's,
    ties to even as numpy rounds them), a spacing within CORNER_TOLERANCE_MM of the target kept."""
    if grid == "corner":
        kept = corner_spacing(spacing, target)
        sizes = [max(1, int(np.round((n - 1) * s / t + 1.0))) for n, s, t in zip(shape, spacing, kept, strict=True)]
    else:
        sizes = [max(1, round(n * s / t)) for n, s, t in zip(shape, spacing, target, strict=True)]
    return sizes[0], sizes[1], sizes[2]


def corner_spacing(spacing: tuple[float, float, float],
                   target: tuple[float, float, float]) -> tuple[float, float, float]:
    """The spacing the corner grid takes: the target, or the volume's own where it is within CORNER_TOLERANCE_MM
    of it (MONAI's Spacing keeps it then)."""
    kept = [s if abs(s - t) <= CORNER_TOLERANCE_MM else t for s, t in zip(spacing, target, strict=True)]
    return kept[0], kept[1], kept[2]


def corner_map(size_in: int, size_out: int, step: float, *, from_end: bool) -> AxisMap:
    """One axis of the corner grid: output voxel i at i × step source voxels from the first voxel, or (`from_end`:
    an axis the model sees reversed) the last output voxel on the last source voxel, stepping back."""
    return AxisMap((size_in - 1) - (size_out - 1) * step if from_end else 0.0, step)
