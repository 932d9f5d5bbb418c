"""nnU-Net's resampling rules (`resample_data_or_seg_to_shape` in nnunetv2/preprocessing/resampling): which axis is
resampled on its own, and how.

- An axis is "low resolution" when its spacing is the largest and the largest is more than `anisotropy_threshold`
  (3) times the smallest — first judged on the spacing resampled from, then on the one resampled to; two or three
  such axes (or `force_separate_z: false`) mean none. `force_separate_z: true` takes the low-resolution axis of the
  spacing resampled from.
- With such an axis, each of its slices is resized in-plane with spline `order`, then the slices are interpolated
  along it with `order_z` (0: nearest) at half-pixel centres, the border repeated.
- Otherwise the whole channel is resized with spline `order` (app.inference.volume3d.nnunet.spline).
A volume already of the target shape is returned as it is.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from app.inference.model.nnunet_recipe import Resampling
from app.inference.volume3d.nnunet.spline import resize, sample_axis

Spacing = Sequence[float]


def new_shape(shape: Sequence[int], spacing: Spacing, target: Spacing) -> tuple[int, ...]:
    """nnU-Net's `compute_new_shape`: round(old spacing / new spacing × old size) per axis."""
    return tuple(round(s / t * n) for n, s, t in zip(shape, spacing, target, strict=True))


def separate_axis(rule: Resampling, current: Spacing, target: Spacing) -> int | None:
    """The axis resampled on its own (nnU-Net's `determine_do_sep_z_and_axis`), or None."""
    if rule.force_separate_z is not None:
        axes = _lowres_axes(current) if rule.force_separate_z else []
    elif _anisotropic(current, rule.anisotropy_threshold):
        axes = _lowres_axes(current)
    elif _anisotropic(target, rule.anisotropy_threshold):
        axes = _lowres_axes(target)
    else:
        axes = []
    return axes[0] if len(axes) == 1 else None


def resample_channels(data: np.ndarray, shape: Sequence[int], current: Spacing, target: Spacing, rule: Resampling,
                      *, dtype: type[np.floating] = np.float32) -> np.ndarray:
    """[C, *spatial] resampled to [C, *shape] by nnU-Net's rules, as `dtype`."""
    if tuple(data.shape[1:]) == tuple(shape):
        return data.astype(dtype, copy=False)
    axis = separate_axis(rule, current, target)
    out = np.empty((data.shape[0], *shape), dtype)
    for c in range(data.shape[0]):
        out[c] = resize(data[c], shape, rule.order) if axis is None else _separately(data[c], shape, axis, rule)
    return out


def _separately(channel: np.ndarray, shape: Sequence[int], axis: int, rule: Resampling) -> np.ndarray:
    """In-plane spline per slice along `axis`, then `order_z` along it."""
    plane = [n for k, n in enumerate(shape) if k != axis]
    moved = np.moveaxis(channel, axis, 0)
    here = np.stack([resize(moved[k], plane, rule.order) for k in range(moved.shape[0])])
    if here.shape[0] != shape[axis]:
        n, size = here.shape[0], shape[axis]
        coords = float(n) / size * (np.arange(size, dtype=np.float64) + 0.5) - 0.5
        here = sample_axis(here, 0, coords, rule.order_z)
    return np.moveaxis(here, 0, axis)


def _anisotropic(spacing: Spacing, threshold: float) -> bool:
    return bool(max(spacing) / min(spacing) > threshold)


def _lowres_axes(spacing: Spacing) -> list[int]:
    largest = max(spacing)
    return [k for k, s in enumerate(spacing) if largest / s == 1]
