"""Sliding-window (tiled) inference, the pure parts: where the tiles go, how much each pixel of a tile counts,
and the blended accumulation of per-tile probabilities into a label mask.

An image larger than the model's tile is covered by overlapping tiles at its native scale (no squashing, so
small objects survive). Edge tiles are shifted inside the image instead of being zero-padded; only a side
shorter than the tile is padded (bottom/right, as the untiled pipeline pads). Per-tile probabilities (after the
activation) are summed with separable blend weights and divided by the summed weights, then thresholded or
argmaxed: a blend of scores, never a vote of per-tile masks.

Memory stays bounded: tiles are accumulated one strip of tile rows at a time (float32, C × tile height × image
width); rows no later tile can touch are finished at once into the uint8 mask and into the kept float16 scores,
which are reduced by a whole factor when the image has more than KEPT_PIXELS pixels. A 16384² image with
4 classes never holds full-resolution float32 (or float16) scores for all its classes.

This module knows numpy and OpenCV only; pipeline.py runs the tiles through the session.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

import cv2
import numpy as np

from app.inference.image.half import half_planes, to_half, write_half
from app.inference.model.tiles import BLENDS, MAX_TILES, TileSpec, untileable

if TYPE_CHECKING:
    from app.inference.model.spec import ModelSpec

Decide = Callable[[np.ndarray], np.ndarray]  # normalised (C, h, w) float32 probabilities → uint8 labels

KEPT_PIXELS = 4096 * 4096  # kept scores above this many pixels per class are reduced by a whole factor
_GAUSSIAN_SIGMA = 0.125  # of the tile side, as MONAI's sliding_window_inference
_MIN_WEIGHT = 1e-3  # relative: a pixel seen only by a tile's edge still counts (every pixel is covered)


def with_tiling(spec: ModelSpec, tile: bool | None) -> ModelSpec:
    """The ModelSpec with tiling switched on (`--tile`) or off (`--no-tile`; back to stretch), or as it is for
    None. Raises ValueError when the model cannot be tiled."""
    if tile is None:
        return spec
    inp = spec.input
    if not tile:
        return replace(spec, input=replace(inp, resize="stretch")) if inp.resize == "tile" else spec
    problem = untileable(spec.output.kind)
    if problem is None and None in inp.model_hw and (inp.size is not None or inp.model_hw != (None, None)):
        problem = "the model's input has a fixed side or a working size (input.size); tiles need both sides " \
                  "fixed (the tile is the input size) or both dynamic (input.tile.size)"
    if problem:
        raise ValueError(f"{spec.path.name} cannot be tiled: {problem}")
    return replace(spec, input=replace(inp, resize="tile"))


def tile_size(model_hw: tuple[int | None, int | None], tile: TileSpec) -> tuple[int, int]:
    """A fixed model's tile is its input size; a dynamic model's is `tile.size`."""
    height, width = model_hw
    return (height, width) if height is not None and width is not None else tile.size


def is_tiled(resize: str, model_hw: tuple[int | None, int | None], tile: TileSpec,
             image_hw: tuple[int, int]) -> bool:
    """resize: tile runs a fixed model as tiles always, a dynamic one above `tile.max_pixels`."""
    if resize != "tile":
        return False
    return None not in model_hw or image_hw[0] * image_hw[1] > tile.max_pixels


def starts(length: int, tile: int, overlap: float) -> list[int]:
    """Tile origins along one side: stride tile·(1 − overlap), the last one shifted back inside the image."""
    if length <= tile:
        return [0]
    stride = max(1, tile - round(tile * overlap))
    count = math.ceil((length - tile) / stride) + 1
    return sorted({min(i * stride, length - tile) for i in range(count)})


def tile_count(image_hw: tuple[int, int], tile_hw: tuple[int, int], overlap: float) -> int:
    """How many tiles `grid` makes, without making it (one side's starts at a time)."""
    return len(starts(image_hw[0], tile_hw[0], overlap)) * len(starts(image_hw[1], tile_hw[1], overlap))


def too_many_tiles(image_hw: tuple[int, int], tile_hw: tuple[int, int], overlap: float) -> str | None:
    """Why this image must not be tiled so (one line naming the sidecar keys), or None."""
    count = tile_count(image_hw, tile_hw, overlap)
    if count <= MAX_TILES:
        return None
    return (f"{image_hw[1]}×{image_hw[0]} image needs {count} tiles of {tile_hw[1]}×{tile_hw[0]} at overlap "
            f"{overlap:g}; the limit is {MAX_TILES} (raise input.tile.size or lower input.tile.overlap)")


def grid(image_hw: tuple[int, int], tile_hw: tuple[int, int], overlap: float) -> list[tuple[int, int]]:
    """(y, x) origins of every tile, row by row (the order tiles are run and accumulated in)."""
    ys, xs = starts(image_hw[0], tile_hw[0], overlap), starts(image_hw[1], tile_hw[1], overlap)
    return [(y, x) for y in ys for x in xs]


def weights_1d(length: int, blend: str) -> np.ndarray:
    """float32 weights of one tile side: highest in the middle (gaussian, linear) or flat (constant)."""
    centre = np.arange(length, dtype=np.float64) + 0.5 - length / 2
    if blend == "gaussian":
        sigma = max(_GAUSSIAN_SIGMA * length, 1e-6)
        w = np.exp(-0.5 * (centre / sigma) ** 2)
    elif blend == "linear":
        w = 1.0 - np.abs(centre) / (length / 2)
    elif blend == "constant":
        w = np.ones(length)
    else:
        raise ValueError(f"blend must be one of {' | '.join(BLENDS)}, got {blend!r}")
    weights: np.ndarray = np.maximum(w / w.max(), _MIN_WEIGHT).astype(np.float32)
    return weights


def blend_weights(tile_hw: tuple[int, int], blend: str) -> np.ndarray:
    """(h, w) float32 weights of one tile: the outer product of the two sides' weights."""
    return np.outer(weights_1d(tile_hw[0], blend), weights_1d(tile_hw[1], blend))


def kept_factor(image_hw: tuple[int, int], limit: int = KEPT_PIXELS) -> int:
    """The whole factor kept scores are reduced by so they hold at most `limit` pixels per class."""
    return max(1, math.ceil(math.sqrt(image_hw[0] * image_hw[1] / limit)))


class Accumulator:
    """Blends tile probabilities, one strip of tile rows at a time; `finish()` gives the mask and kept scores.

    Feed tiles in `grid` order (row by row). `decide(planes)` turns normalised (C, h, w) float32 probabilities
    into uint8 labels (threshold or argmax); it is given by the caller, who knows the output kind.
    """

    def __init__(self, image_hw: tuple[int, int], tile_hw: tuple[int, int], channels: int, *, blend: str,
                 decide: Decide, kept_limit: int = KEPT_PIXELS) -> None:
        self.image_hw, self.tile_hw, self.decide = image_hw, tile_hw, decide
        self.weights = blend_weights(tile_hw, blend)
        h, w = image_hw
        self.mask = np.zeros(image_hw, np.uint8)
        self.factor = kept_factor(image_hw, kept_limit)
        self.kept = np.zeros((channels, -(-h // self.factor), -(-w // self.factor)), np.float16)
        self.top = 0  # first image row of the strip; rows above it are finished
        self.sums = np.zeros((channels, min(tile_hw[0], h), w), np.float32)
        self.norm = np.zeros((min(tile_hw[0], h), w), np.float32)
        self.highest = 0.0  # the largest foreground probability (plane 0 of a binary output)
        self._pending: list[np.ndarray] = []  # finished rows not yet reduced into `kept` (factor > 1)
        self._kept_rows = 0  # rows of `kept` filled so far (factor > 1)

    def add(self, origin: tuple[int, int], planes: np.ndarray) -> None:
        """One tile's probabilities (C, th, tw) float32 at `origin`, cut to the image (padding removed)."""
        y, x = origin
        if y > self.top:
            self._finish_rows(y)
        th, tw = planes.shape[1:]
        weights = self.weights[:th, :tw]
        rows = slice(y - self.top, y - self.top + th)
        self.norm[rows, x: x + tw] += weights
        for c, plane in enumerate(planes):
            target = self.sums[c, rows, x: x + tw]
            cv2.accumulateProduct(np.ascontiguousarray(plane), weights, target)

    def finish(self) -> tuple[np.ndarray, np.ndarray]:
        """(uint8 mask at the image's size, float16 kept scores at the image's size ÷ `factor`)."""
        self._finish_rows(self.image_hw[0])
        self._reduce(final=True)
        return self.mask, self.kept

    def _finish_rows(self, until: int) -> None:
        """Rows [top, until) get no more tiles: normalise, decide, keep; the strip moves down to `until`."""
        count = until - self.top
        planes = self.sums[:, :count] / np.maximum(self.norm[:count], 1e-12)
        self.mask[self.top: until] = self.decide(planes)
        if planes.shape[0] == 1:
            self.highest = max(self.highest, float(planes[0].max(initial=0.0)))
        self._keep(planes)
        self.sums = np.concatenate([self.sums[:, count:], np.zeros_like(self.sums[:, :count])], axis=1)
        self.norm = np.concatenate([self.norm[count:], np.zeros_like(self.norm[:count])])
        self.top = until

    def _keep(self, planes: np.ndarray) -> None:
        if self.factor == 1:  # float16 through OpenCV: numpy's cast is slow on background probabilities (half.py)
            write_half(self.kept[:, self.top: self.top + planes.shape[1]], planes)
            return
        self._pending.append(half_planes(planes))
        self._reduce(final=False)

    def _reduce(self, *, final: bool) -> None:
        """Pending finished rows → kept rows, `factor` image rows (and columns) averaged into one."""
        if not self._pending:
            return
        rows = np.concatenate(self._pending, axis=1) if len(self._pending) > 1 else self._pending[0]
        f = self.factor
        usable = rows.shape[1] if final else rows.shape[1] // f * f
        if usable == 0:
            return
        self._pending = [rows[:, usable:]] if usable < rows.shape[1] else []
        start = self._kept_rows
        out_h, out_w = -(-usable // f), self.kept.shape[2]
        for c in range(rows.shape[0]):
            plane = rows[c, :usable].astype(np.float32)
            reduced = cv2.resize(plane, (out_w, out_h), interpolation=cv2.INTER_AREA)
            self.kept[c, start: start + out_h] = to_half(reduced)
        self._kept_rows = start + out_h


def binary_decider(threshold: float) -> Decide:
    """Foreground where the blended probability is above `threshold`."""
    return lambda planes: (planes[0] > threshold).view(np.uint8)


def argmax_decider(planes: np.ndarray) -> np.ndarray:
    """The class with the highest blended probability (first wins on ties, as numpy)."""
    labels: np.ndarray = planes.argmax(axis=0).astype(np.uint8)
    return labels
