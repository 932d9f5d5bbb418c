"""nnU-Net's sliding window over logits (nnunetv2/inference/sliding_window_prediction.py and the predictor's
`predict_sliding_window_return_logits`):
- a volume smaller than the patch is padded with zeros, half before (floor), the rest after, and cropped back;
- along each axis ceil((size − patch) / (patch × step)) + 1 windows, spread evenly (`round(i × (size − patch) /
  (n − 1))`, numpy's round half to even); a 2D configuration (patch depth 1) visits every slice once;
- each window's logits are the mean over the mirroring passes (the unmirrored one and every combination of the
  allowed axes, each flipped back), weighted by the Gaussian importance map — a unit impulse at the patch centre
  (`size // 2`) blurred with σ = size / 8 per axis, truncated at 4σ (scipy's gaussian_filter), scaled to a peak of
  10, zeros raised to the smallest non-zero weight — and summed with the weights, then divided by them.
Sums are float32 (nnU-Net keeps float16 on the CPU). A window's mirror passes run as batches of up to
BATCH_VOXELS voxels: all of them at once for a small patch (fewer runs), one at a time for a full-size network's
(80 × 160 × 160: a batch of 8 held 12.8 GB and ran each patch slower than one by one, the convolutions being
compute-bound).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence

import numpy as np

from app.errors import InferenceError
from app.inference.image.pipeline import Stopped

Shape3 = tuple[int, int, int]
RunFn = Callable[[np.ndarray], np.ndarray]  # [B, C, pd, ph, pw] float32 → [B, K, pd, ph, pw] logits
ProgressFn = Callable[[int, int], None]
StopFn = Callable[[], bool]
BATCH_VOXELS = 1 << 20  # patch voxels per run, the mirror passes of a window batched up to it (at least one)


def window_steps(size: int, patch: int, step: float) -> list[int]:
    """nnU-Net's `compute_steps_for_sliding_window` along one axis (size ≥ patch); a patch side of 1 (a 2D
    configuration's depth) steps over every slice."""
    if patch == 1:
        return list(range(size))
    count = math.ceil((size - patch) / (patch * step)) + 1
    if count == 1:
        return [0]
    actual = (size - patch) / (count - 1)
    return [int(np.round(actual * i)) for i in range(count)]


def gaussian_map(patch: Shape3) -> np.ndarray:
    """nnU-Net's `compute_gaussian(patch, sigma_scale=1/8, value_scaling_factor=10)` as float32; a patch depth of 1
    (2D) weighs only the plane."""
    weights: np.ndarray | None = None
    for size in patch:
        line = np.ones(1) if size == 1 else _impulse_response(size, size / 8.0)
        weights = line if weights is None else weights[..., None] * line
    assert weights is not None
    weights = weights / (weights.max() / 10.0)
    out = weights.astype(np.float32)
    nonzero = out[out > 0]
    out[out == 0] = nonzero.min()
    return out


def _impulse_response(size: int, sigma: float) -> np.ndarray:
    """scipy.ndimage.gaussian_filter1d of a unit impulse at size // 2 (truncate 4, zeros outside)."""
    radius = int(4.0 * sigma + 0.5)
    x = np.arange(-radius, radius + 1, dtype=np.float64)
    kernel = np.exp(-0.5 / (sigma * sigma) * x * x)
    kernel /= kernel.sum()
    line = np.zeros(size)
    centre = size // 2
    for offset, value in zip(range(-radius, radius + 1), kernel, strict=True):
        if 0 <= centre + offset < size:
            line[centre + offset] = value
    return line


def mirror_combinations(axes: Sequence[int]) -> list[tuple[int, ...]]:
    """The unmirrored pass and every combination of `axes`, as nnU-Net lists them."""
    unique = sorted(set(axes))
    return [(), *(c for k in range(1, len(unique) + 1) for c in itertools.combinations(unique, k))]


def padding(shape: Shape3, patch: Shape3) -> list[tuple[int, int]]:
    """acvl_utils' pad_nd_image: the zeros before and after along each axis to reach the patch."""
    out = []
    for size, side in zip(shape, patch, strict=True):
        missing = max(side - size, 0)
        out.append((missing // 2, missing - missing // 2))
    return out


def window_logits(image: np.ndarray, run: RunFn, *, patch: Shape3, step: float, mirror_axes: Sequence[int],
                  progress: ProgressFn | None = None, should_stop: StopFn | None = None) -> np.ndarray:
    """The blended logits [K, D, H, W] float32 of `image` ([C, D, H, W] float32, normalised and resampled)."""
    pads = padding((image.shape[1], image.shape[2], image.shape[3]), patch)
    padded = np.pad(image, [(0, 0), *pads]) if any(any(p) for p in pads) else image
    shape = (padded.shape[1], padded.shape[2], padded.shape[3])
    starts = list(itertools.product(*(window_steps(n, p, step) for n, p in zip(shape, patch, strict=True))))
    passes = mirror_combinations(mirror_axes)
    weights = gaussian_map(patch)
    total: np.ndarray | None = None
    count = np.zeros(shape, np.float32)
    for done, start in enumerate(starts):
        if should_stop is not None and should_stop():
            raise Stopped(f"stopped after {done * len(passes)} of {len(starts) * len(passes)} patches")
        region = tuple(slice(s, s + p) for s, p in zip(start, patch, strict=True))
        channels_region = (slice(None), *region)
        logits = _mirrored(run, padded[channels_region], passes, patch)
        if total is None:
            total = np.zeros((logits.shape[0], *shape), np.float32)
        total[channels_region] += logits * weights
        count[region] += weights
        if progress is not None:
            progress((done + 1) * len(passes), len(starts) * len(passes))
    assert total is not None
    total /= count
    crop = (slice(None), *(slice(before, before + n) for (before, _), n in zip(pads, image.shape[1:], strict=True)))
    return total if padded is image else np.ascontiguousarray(total[crop])


def _mirrored(run: RunFn, window: np.ndarray, passes: list[tuple[int, ...]], patch: Shape3) -> np.ndarray:
    """The window's logits [K, pd, ph, pw] averaged over the mirroring passes, run in batches of `pass_batch`."""
    size = pass_batch(patch, len(passes))
    total: np.ndarray | None = None
    for first in range(0, len(passes), size):
        chunk = passes[first:first + size]
        batch = np.stack([np.flip(window, tuple(a + 1 for a in flips)) if flips else window for flips in chunk])
        out = np.asarray(run(np.ascontiguousarray(batch, np.float32)))
        if out.ndim != 5 or out.shape[0] != len(chunk) or tuple(out.shape[2:]) != patch:
            raise InferenceError(f"the 3D model's output for a batch of {len(chunk)} patches of "
                                 f"{'×'.join(map(str, patch))} voxels has shape {list(out.shape)}")
        if total is None:
            total = np.zeros(out.shape[1:], np.float32)
        for k, flips in enumerate(chunk):
            total += np.flip(out[k], tuple(a + 1 for a in flips)) if flips else out[k]
    assert total is not None
    total /= np.float32(len(passes))
    return total


def pass_batch(patch: Shape3, passes: int) -> int:
    """Mirror passes per run: as many as BATCH_VOXELS holds, at least one, at most all."""
    voxels = patch[0] * patch[1] * patch[2]
    return max(1, min(passes, BATCH_VOXELS // max(voxels, 1)))


def patch_count(shape: Shape3, patch: Shape3, step: float, mirror_axes: Sequence[int]) -> int:
    """Patch evaluations over a model grid of `shape`: windows × mirroring passes."""
    windows = 1
    for size, side in zip(shape, patch, strict=True):
        windows *= len(window_steps(max(size, side), side, step))
    return windows * len(mirror_combinations(mirror_axes))
