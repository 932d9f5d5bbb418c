"""A 3D model's intensity normalisation (the sidecar's input.normalize), as nnU-Net does it:
- "ct": clip to [lo, hi] HU, then (x − mean) / std with the training set's statistics (CTNormalization);
- "zscore": (x − mean) / std with this volume's own statistics, over its non-zero voxels only (`nonzero`, nnU-Net's
  use_mask_for_norm: the zero background stays 0) or over all voxels (ZScoreNormalization);
- "scale": (x × scale − mean) / std, the 2D models' input.scale/mean/std.
std is floored at 1e-8 (a constant volume does not divide by zero). Statistics are gathered slice by slice in
float64 (Chan's parallel update), so a 16-bit CT is never copied whole into floats to be measured.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.inference.model.spec import Normalize3D


@dataclass(frozen=True)
class Intensity:
    """One channel's voxel mapping: clip, multiply by `scale`, subtract `mean`, divide by `std`."""

    clip: tuple[float, float] | None = None
    scale: float = 1.0
    mean: float = 0.0
    std: float = 1.0
    keep_zero: bool = False  # zscore over non-zero voxels: zeros stay zero

    def apply(self, values: np.ndarray) -> np.ndarray:
        """`values` (any numeric dtype) mapped to float32; the input is never modified."""
        out = np.array(values, np.float32, copy=True)
        if self.clip is not None:
            np.clip(out, self.clip[0], self.clip[1], out=out)
        if self.scale != 1.0:
            out *= np.float32(self.scale)
        out -= np.float32(self.mean)
        out *= np.float32(1.0 / max(self.std, 1e-8))
        if self.keep_zero:
            out[np.asarray(values) == 0] = 0.0
        return out


def intensity(normalize: Normalize3D, channel: np.ndarray) -> Intensity:
    """The mapping of one channel ([D, H, W], real units) under `normalize`."""
    if normalize.kind == "ct":
        return Intensity(clip=normalize.clip, mean=normalize.mean, std=normalize.std)
    if normalize.kind == "scale":
        return Intensity(scale=normalize.scale, mean=normalize.mean, std=normalize.std)
    if normalize.kind == "zscore":
        mean, std = statistics(channel, nonzero=normalize.nonzero)
        return Intensity(mean=mean, std=std, keep_zero=normalize.nonzero)
    raise ValueError(f"unknown input.normalize kind {normalize.kind!r} (ct, zscore or scale)")


def statistics(channel: np.ndarray, *, nonzero: bool) -> tuple[float, float]:
    """Mean and (population) standard deviation of the channel's voxels, or of its non-zero ones; (0, 1) when
    there are none."""
    count, mean, squares = 0, 0.0, 0.0
    for plane in channel:
        values = np.asarray(plane, np.float64)
        if nonzero:
            values = values[values != 0]
        n = values.size
        if n == 0:
            continue
        plane_mean = float(values.mean())
        plane_squares = float(((values - plane_mean) ** 2).sum())
        total = count + n
        delta = plane_mean - mean
        squares += plane_squares + delta * delta * count * n / total
        mean += delta * n / total
        count = total
    if count == 0:
        return 0.0, 1.0
    return mean, float(np.sqrt(squares / count))
