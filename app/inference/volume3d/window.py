"""The 3D sliding window: patches at MONAI's positions, Gaussian (or constant) importance weights, batches of
patches, mirroring test-time augmentation, progress and cancellation between session runs.

Everything here matches MONAI's `sliding_window_inference` (monai/inferers/utils.py) and its helpers
`_get_scan_interval`, `dense_patch_slices` and `compute_importance_map` (monai/data/utils.py), so that SegLens's
blended probabilities equal MONAI's on the same model (tests/inference/volume3d/test_volume3d_monai.py):
- a volume smaller than the patch along an axis is padded with zeros (MONAI's default; `tile.pad` "edge": its
  border voxels repeated, MONAI's padding_mode "replicate"), half before (floor) and the rest after, and the
  result cropped back;
- the step is int(patch × (1 − overlap)) (at least 1; the patch itself where it equals the volume), and the last
  window is shifted inside the volume;
- windows are visited D first, then H, then W (numpy's meshgrid "ij"), in batches of `tile.batch`;
- the Gaussian map is the product of 1-D Gaussians with σ = sigma_scale × patch, clamped below at the larger of its
  smallest value and 1e-3 (MONAI's rule: corner weights never vanish, so every voxel has a weight);
- each patch adds probabilities × weights to a float32 accumulator, each window its weights to a float32 count,
  and the accumulator is divided by the count at the end.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import cv2
import numpy as np

from app.errors import InferenceError
from app.inference.image.pipeline import Stopped
from app.inference.model.spec import Tile3D

Patch = tuple[int, int, int]
Start = tuple[int, int, int]
RunFn = Callable[[np.ndarray], np.ndarray]
ProgressFn = Callable[[int, int], None]
StopFn = Callable[[], bool]


def gaussian_importance(patch: Patch, sigma_scale: float = 0.125) -> np.ndarray:
    """MONAI's Gaussian importance map of a patch, float32 [pd, ph, pw] (compute_importance_map, mode gaussian)."""
    weights: np.ndarray | None = None
    for size in patch:
        x = np.arange(-(size - 1) / 2.0, (size - 1) / 2.0 + 1, dtype=np.float32)
        sigma = size * sigma_scale
        line = np.exp(x**2 / np.float32(-2 * sigma**2)).astype(np.float32)
        weights = line if weights is None else weights[..., None] * line
    assert weights is not None
    return _clamped(weights)


def importance(patch: Patch, tile: Tile3D) -> np.ndarray:
    """The weights each patch's probabilities are blended with: Gaussian or constant (ones), float32."""
    if tile.blend == "gaussian":
        return gaussian_importance(patch, tile.sigma_scale)
    if tile.blend == "constant":
        return np.ones(patch, np.float32)
    raise ValueError(f"unknown blend {tile.blend!r} (gaussian or constant)")


def _clamped(weights: np.ndarray) -> np.ndarray:
    """MONAI clamps the map at max(its minimum, 1e-3): a corner weight of a 3-D Gaussian (~1e-11) is raised."""
    floor = max(float(weights.min()), 1e-3)
    clamped: np.ndarray = np.maximum(weights, np.float32(floor)).astype(np.float32)
    return clamped


def scan_interval(size: int, patch: int, overlap: float) -> int:
    """MONAI's `_get_scan_interval` along one axis (`size` already padded to at least `patch`)."""
    if patch == size:
        return patch
    return max(int(patch * (1 - overlap)), 1)


def window_starts(size: int, patch: int, overlap: float) -> list[int]:
    """Where the windows along one axis start (MONAI's `dense_patch_slices`): every interval, the last one
    shifted back inside. A `size` below the patch (padded by the caller) has one window at 0."""
    if not 0 <= overlap < 1:
        raise ValueError(f"overlap must be >= 0 and < 1, got {overlap}")
    size = max(size, patch)
    interval = scan_interval(size, patch, overlap)
    count = 1
    for index in range(math.ceil(size / interval)):
        if index * interval + patch >= size:
            count = index + 1
            break
    return [min(index * interval, size - patch) for index in range(count)]


def window_grid(shape: tuple[int, int, int], patch: Patch, overlap: float) -> list[Start]:
    """Every window's (d, h, w) start, D outermost and W innermost (MONAI's order)."""
    axes = [window_starts(shape[n], patch[n], overlap) for n in range(3)]
    return [(d, h, w) for d in axes[0] for h in axes[1] for w in axes[2]]


def mirror_passes(axes: tuple[int, ...]) -> list[tuple[int, ...]]:
    """The flips of one patch's TTA: none, then every combination of `axes` (8 passes for all three)."""
    unique = tuple(sorted(set(axes)))
    if any(axis not in (0, 1, 2) for axis in unique):
        raise ValueError(f"mirror axes must be 0 (D), 1 (H) or 2 (W), got {axes}")
    return [combo for count in range(len(unique) + 1) for combo in itertools.combinations(unique, count)]


def padding(shape: tuple[int, int, int], patch: Patch) -> tuple[tuple[int, int], ...]:
    """Zeros added (before, after) along D, H, W where the volume is smaller than the patch (MONAI's split)."""
    pads = []
    for size, extent in zip(shape, patch, strict=True):
        missing = max(extent - size, 0)
        pads.append((missing // 2, missing - missing // 2))
    return tuple(pads)


def patch_count(shape: tuple[int, int, int], patch: Patch, tile: Tile3D, mirror_axes: tuple[int, ...] = ()) -> int:
    """Patch evaluations a sliding window over `shape` makes: windows × TTA passes."""
    padded = tuple(max(s, p) for s, p in zip(shape, patch, strict=True))
    return len(window_grid((padded[0], padded[1], padded[2]), patch, tile.overlap)) * len(mirror_passes(mirror_axes))


def sliding_window(image: np.ndarray, run: RunFn, *, patch: Patch, tile: Tile3D, mirror_axes: tuple[int, ...] = (),
                   progress: ProgressFn | None = None, should_stop: StopFn | None = None) -> np.ndarray:
    """Blend `run`'s outputs (activated probabilities, or raw outputs activated after the blend) over windows of
    `image` ([C, D, H, W] float32, already resampled, oriented and normalised) into [K, D, H, W] float32,
    normalised by the summed weights.

    `run` maps a batch [B, C, pd, ph, pw] to [B, K, pd, ph, pw] outputs, a new array each call (it is
    blended while the next call runs; session.run's outputs are). `progress(done, total)` counts
    patch evaluations (TTA passes included); `should_stop()` is asked before every session run, and a True
    answer raises `Stopped`.

    One thread blends batch n while `run` works on batch n + 1 (ONNX Runtime and OpenCV release the GIL), so the
    blend costs little beyond the runs; the adds keep their order, so the sums are those of a single thread.
    """
    pads = padding((image.shape[1], image.shape[2], image.shape[3]), patch)
    padded = _padded(image, pads, edge=tile.pad == "edge") if any(any(p) for p in pads) else image
    shape = (padded.shape[1], padded.shape[2], padded.shape[3])
    grid = window_grid(shape, patch, tile.overlap)
    passes = mirror_passes(mirror_axes)
    blender = _Blender(shape, patch, importance(patch, tile))
    counter = _Counter(len(grid) * len(passes), progress, should_stop)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="blend3d") as blending:
        pending = blending.submit(blender.count, grid)
        for batch in _batches(grid, max(1, tile.batch)):
            tensor = np.stack([padded[_all_channels(_window(start, patch))] for start in batch])
            probabilities = _mirrored(run, tensor, passes, patch, counter)
            pending.result()  # at most one batch waits to be blended: memory stays that of one batch
            pending = blending.submit(blender.add, batch, probabilities)
        pending.result()
    blended = blender.finish()
    if padded is image:
        return blended
    crop = tuple(slice(before, before + size) for (before, _), size in zip(pads, image.shape[1:], strict=True))
    return np.ascontiguousarray(blended[_all_channels(crop)])


def _padded(image: np.ndarray, pads: tuple[tuple[int, int], ...], *, edge: bool) -> np.ndarray:
    """`image` [C, D, H, W] padded along D, H, W: zeros, or (edge) its border voxels repeated."""
    widths = ((0, 0), *pads)
    return np.pad(image, widths, mode="edge") if edge else np.pad(image, widths)


def _window(start: Start, patch: Patch) -> tuple[slice, slice, slice]:
    return (slice(start[0], start[0] + patch[0]), slice(start[1], start[1] + patch[1]),
            slice(start[2], start[2] + patch[2]))


def _all_channels(region: tuple[slice, ...]) -> tuple[slice, ...]:
    return (slice(None), *region)


def _batches(grid: list[Start], size: int) -> Iterator[list[Start]]:
    for first in range(0, len(grid), size):
        yield grid[first: first + size]


class _Counter:
    """Patch evaluations done of all, reported after each run; asked whether to stop before each."""

    def __init__(self, total: int, progress: ProgressFn | None, should_stop: StopFn | None) -> None:
        self.total, self.done = total, 0
        self._progress, self._should_stop = progress, should_stop

    def before_run(self) -> None:
        if self._should_stop is not None and self._should_stop():
            raise Stopped(f"stopped after {self.done} of {self.total} patches")

    def after_run(self, patches: int) -> None:
        self.done += patches
        if self._progress is not None:
            self._progress(self.done, self.total)


def _mirrored(run: RunFn, tensor: np.ndarray, passes: list[tuple[int, ...]], patch: Patch,
              counter: _Counter) -> np.ndarray:
    """The batch's probabilities averaged over the TTA passes: each flipped input's prediction flipped back."""
    if passes == [()]:  # no TTA: the run's output as it is, not copied
        counter.before_run()
        out = np.asarray(_checked(run(tensor), len(tensor), patch), np.float32)
        counter.after_run(len(tensor))
        return out
    total: np.ndarray | None = None
    for flips in passes:
        axes = tuple(axis + 2 for axis in flips)
        counter.before_run()
        given = np.ascontiguousarray(np.flip(tensor, axes)) if axes else tensor
        out = _checked(run(given), len(tensor), patch)
        out = np.flip(out, axes) if axes else out
        total = out.astype(np.float32, copy=True) if total is None else np.add(total, out, out=total)
        counter.after_run(len(tensor))
    assert total is not None
    total *= np.float32(1.0 / len(passes))
    return total


def _checked(out: np.ndarray, batch: int, patch: Patch) -> np.ndarray:
    """The run's output must be [B, K, pd, ph, pw]: a model that changes the patch's size cannot be blended."""
    array = np.asarray(out)
    if array.ndim != 5 or array.shape[0] != batch or tuple(array.shape[2:]) != patch:
        raise InferenceError(f"the 3D model's output for a batch of {batch} patches of {'×'.join(map(str, patch))} "
                             f"voxels has shape {list(array.shape)}; expected [{batch}, K, "
                             f"{', '.join(map(str, patch))}]")
    return array


class _Blender:
    """Probabilities × weights summed in a float32 accumulator, normalised by the summed weights at the end.

    The sums go plane by plane through OpenCV's accumulate / accumulateProduct, straight into the accumulator's
    strided window (one pass, SIMD): numpy's multiply-then-add took 3-4 times as long per patch."""

    def __init__(self, shape: tuple[int, int, int], patch: Patch, weights: np.ndarray) -> None:
        self._shape, self._patch, self._weights = shape, patch, weights
        self._count = np.zeros(shape, np.float32)
        self._sum: np.ndarray | None = None

    def count(self, grid: list[Start]) -> None:
        """All windows' weights summed first, in window order, as MONAI sums its count map."""
        for start in grid:
            region = self._count[_window(start, self._patch)]
            for d in range(self._patch[0]):
                cv2.accumulate(self._weights[d], region[d])

    def add(self, starts: list[Start], probabilities: np.ndarray) -> None:
        if self._sum is None:  # K is known from the first output
            self._sum = np.zeros((probabilities.shape[1], *self._shape), np.float32)
        if probabilities.shape[1] != self._sum.shape[0]:
            raise InferenceError(f"the 3D model's output changed from {self._sum.shape[0]} to "
                                 f"{probabilities.shape[1]} channels between patches")
        for start, patch_probabilities in zip(starts, probabilities, strict=True):
            region = self._sum[_all_channels(_window(start, self._patch))]
            planes = np.ascontiguousarray(patch_probabilities)
            for c in range(planes.shape[0]):
                for d in range(self._patch[0]):
                    cv2.accumulateProduct(planes[c, d], self._weights[d], region[c, d])

    def finish(self) -> np.ndarray:
        assert self._sum is not None, "no patch was run"
        np.divide(self._sum, self._count, out=self._sum)
        self._count = np.zeros((0, 0, 0), np.float32)  # freed before the caller resamples
        return self._sum
