"""Resizing an array as scikit-image's `resize(image, shape, order, mode="edge", anti_aliasing=False)` does — which
nnU-Net resamples with — in numpy only (scipy is not in the frozen build).

That call is `scipy.ndimage.zoom(..., mode="nearest", grid_mode=True)` followed by a clip to the input's range:
- output index o samples the input at (o + 0.5) × in/out − 0.5 along each axis (half-pixel centres);
- order 0 takes the nearest sample (ties upward), order 1 interpolates linearly, both with the border repeated;
- order 3 is a cubic B-spline: the array is padded by 12 repeated border samples, prefiltered along each axis into
  spline coefficients (the causal/anticausal recursion with pole √3 − 2 and mirror boundaries, scipy's
  `spline_filter1d`), and the coefficients are weighted at each sample's four neighbours.
The interpolation is a tensor product, so it is done one axis at a time; an axis whose size does not change is left
as it is (an interpolating spline returns its samples), and the result is clipped to the input's minimum and maximum
(skimage's `clip=True`). Equal to scikit-image and scipy within float rounding
(tests/inference/volume3d/nnunet/test_nnunet_steps.py).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

ORDERS = (0, 1, 3)
_POLE = np.sqrt(3.0) - 2.0  # the cubic B-spline's one pole
_PAD = 12  # scipy's padding before prefiltering a "nearest"-mode spline
_HORIZON = 64  # beyond z^64 (1e-37) the mirror initialisation's terms are below float64's resolution


def resize(image: np.ndarray, shape: Sequence[int], order: int, *, clip: bool = True) -> np.ndarray:
    """`image` (any dimensions, float) resized to `shape` with spline `order` (0, 1 or 3), as float64."""
    if order not in ORDERS:
        raise ValueError(f"spline order {order} is not one of {ORDERS}")
    out = np.asarray(image, np.float64)
    low, high = (float(out.min()), float(out.max())) if clip and out.size else (0.0, 0.0)
    for axis, size in enumerate(shape):
        if out.shape[axis] != size:
            out = resize_axis(out, axis, int(size), order)
    if clip and order > 1 and out.size:
        np.clip(out, low, high, out=out)
    return out


def resize_axis(image: np.ndarray, axis: int, size: int, order: int) -> np.ndarray:
    """`image` (float64) resized along one axis to `size` samples."""
    n = image.shape[axis]
    return sample_axis(image, axis, (np.arange(size, dtype=np.float64) + 0.5) * (n / size) - 0.5, order)


def sample_axis(image: np.ndarray, axis: int, coords: np.ndarray, order: int) -> np.ndarray:
    """`image` sampled along one axis at `coords` (float64 source positions, border repeated)."""
    moved = np.moveaxis(np.asarray(image, np.float64), axis, 0)
    if order == 0:
        n = moved.shape[0]
        picked = moved[np.clip(np.floor(coords + 0.5).astype(np.int64), 0, n - 1)]
    elif order == 1:
        picked = _linear(moved, coords)
    else:
        picked = _cubic(moved, coords)
    return np.moveaxis(picked, 0, axis)


def _linear(a: np.ndarray, coords: np.ndarray) -> np.ndarray:
    n = a.shape[0]
    at = np.clip(coords, 0.0, n - 1)
    low = np.floor(at).astype(np.int64)
    high = np.minimum(low + 1, n - 1)
    t = _along(at - low, a.ndim)
    out: np.ndarray = a[low] * (1.0 - t) + a[high] * t
    return out


def _cubic(a: np.ndarray, coords: np.ndarray) -> np.ndarray:
    padded = np.concatenate([np.repeat(a[:1], _PAD, axis=0), a, np.repeat(a[-1:], _PAD, axis=0)])
    c = prefilter(padded)
    at = coords + _PAD
    base = np.floor(at)
    t = at - base
    first = base.astype(np.int64) - 1
    last = c.shape[0] - 1
    weights = ((1 - t) ** 3 / 6, (4 - 6 * t**2 + 3 * t**3) / 6, (1 + 3 * t + 3 * t**2 - 3 * t**3) / 6, t**3 / 6)
    out = np.zeros((len(coords), *a.shape[1:]), np.float64)
    for k, w in enumerate(weights):
        out += c[np.clip(first + k, 0, last)] * _along(w, a.ndim)
    return out


def prefilter(a: np.ndarray) -> np.ndarray:
    """Cubic B-spline coefficients of `a` along axis 0 (float64), mirror boundaries (scipy's spline_filter1d)."""
    c: np.ndarray = a * ((1 - _POLE) * (1 - 1 / _POLE))
    n = c.shape[0]
    if n == 1:
        return c
    z = _POLE
    terms = min(n - 1, _HORIZON)
    powers = _along(z ** np.arange(terms, dtype=np.float64), c.ndim)
    z_n1 = z ** (n - 1)
    mirrored = c[n - 1:n - 1 - terms:-1] if n - 1 - terms > 0 else c[n - 1:0:-1]
    first = (powers * (c[:terms] + z_n1 * mirrored)).sum(axis=0)
    c[0] = first / (1 - z_n1 * z_n1)
    for i in range(1, n):
        c[i] += z * c[i - 1]
    c[n - 1] = (z * c[n - 2] + c[n - 1]) * z / (z * z - 1)
    for i in range(n - 2, -1, -1):
        c[i] = z * (c[i + 1] - c[i])
    return c


def _along(values: np.ndarray, ndim: int) -> np.ndarray:
    """A 1-D array shaped to broadcast along axis 0 of an `ndim` array."""
    return values.reshape((-1,) + (1,) * (ndim - 1))
