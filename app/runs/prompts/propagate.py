"""Carry an accepted mask through a volume, slice to slice, with a prompt model (or grabCut).

Each next slice is prompted as SAM-family trackers do without a memory bank: the box around the previous slice's
mask (grown by `margin_px` on each side), the previous slice's low-res logits as SAM's `mask_input`, and a
positive point at the previous mask's most interior pixel (not for grabCut). Of the mask proposed, only the parts
that overlap the previous slice's mask are kept: an object goes on; the look-alike beside it (the other lung) is
not taken in. It goes on until the object ends (area below `min_area_px`), the model doubts its answer (predicted
IoU below `min_iou`), the area jumps (more than `max_area_ratio` times the previous slice's: a leak into a
neighbour), the median grey level under the mask moves more than `max_level_change` from the accepted mask's (it
slid off the object onto its surroundings), more than `max_outside` of the mask lies outside the previous slice's
mask grown by 1 px + twice the growth of its radius (it crept sideways onto a neighbour as bright as the object,
each step under the area ratio: a cross-section grows around itself), the volume ends, `max_slices` were given
masks, or `stop()` is true.
A slice that trips a rule is not given a mask; the one PropagationEnd, always last, says which rule ended it.

On the CT phantom's lung the demo pair follows the labels with a median IoU of 0.95 per slice and ends on the
lung's own first and last slice; without the mask_input the median falls to 0.90 (0.79 at worst), without the
point to 0.84 (a bright ball: 0.34, the demo pair fills the box it is given), and with any box margin its masks
grow slice by slice (a dark ball in a bright ground filled the whole slice: 2 px a side per slice, each step under
the area-jump ratio); the grey level rule ends a mask that slid off its object where the demo pair's predicted
IoU stays high (tests/runs/prompts/test_prompt_propagate.py; the settings turn each off).

The viewer's prompt worker and `seglens-cli prompt --propagate` both drive it; it knows nothing of files: slice i
comes from `pixels(i)` as the encoder should see it (the windowed display pixels).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass

import cv2
import numpy as np

from app.inference.prompt.frame import MASK_GRID, image_to_low_res
from app.inference.prompt.request import Box, Point, PromptError, PromptModel


@dataclass(frozen=True)
class PropagationSettings:
    """When propagation goes on and when it ends (defaults fit the CT phantom's lungs and body at 5 mm)."""

    # the previous mask's bounding box grown by this much each side: the next slice's box. 0 for the demo pair,
    # which fills the box it is given (any margin compounds slice by slice); a real SAM export may like a few px
    margin_px: int = 0
    min_area_px: int = 20  # a mask smaller than this: the object ended
    min_iou: float = 0.5  # the decoder's predicted IoU below this: it doubts its answer (grabCut has none: nan)
    max_area_ratio: float = 2.0  # the area grew more than this many times the previous slice's: a leak
    max_slices: int = 1000  # masks given at most, each way
    mask_input: bool = True  # feed the previous low-res logits as mask_input (off: the box alone)
    # a positive point at the previous mask's most interior pixel, beside the box; None: on for a prompt model, off
    # for grabCut (its points are sure-foreground seeds: a seed would keep an ended object alive)
    center_point: bool | None = None
    connected: bool = True  # keep only the parts of a slice's mask that overlap the previous slice's mask
    # the mean grey level (0-255, the encoder's pixels) under the mask moved more than this from the accepted
    # mask's: the mask slid off the object onto its surroundings (None: not checked)
    max_level_change: float | None = 40.0
    # more than this fraction of the mask lies outside the previous slice's mask grown by a band (1 px + twice the
    # growth of its equivalent radius: an object's cross-section grows around itself, it does not move sideways):
    # the mask left the object, creeping onto a neighbour as bright as it under every area ratio (None: not checked)
    max_outside: float | None = 0.03


@dataclass(frozen=True)
class PropagatedSlice:
    index: int  # the slice (frame) it is for, 0-based
    mask: np.ndarray  # bool HxW (image size)
    iou: float  # the decoder's predicted IoU (nan for grabcut)
    low_res: np.ndarray  # float32 [256, 256], fed as mask_input to the next slice


@dataclass(frozen=True)
class PropagationEnd:
    last: int  # the last slice given a mask (start when none), 0-based
    reason: str  # one line; slices named as the viewer numbers them (1-based)


def propagate(model: PromptModel, pixels: Callable[[int], np.ndarray], *, start: int, mask: np.ndarray,
              low_res: np.ndarray | None, step: int, count: int, key: Callable[[int], Hashable] | None = None,
              settings: PropagationSettings = PropagationSettings(),
              stop: Callable[[], bool] = lambda: False, first: int = 0) -> Iterator[PropagatedSlice | PropagationEnd]:
    """From slice `start` (whose accepted `mask` and, if known, decoder `low_res` are given) towards `start + step`,
    `start + 2·step`, … within slices `first` (0 unless a 4D NIfTI's time point starts later) to `count - 1`: one
    PropagatedSlice per slice given a mask, then one PropagationEnd. A PromptError on a slice (an empty or unusable
    prompt) ends it with that line; other errors propagate."""
    if step not in (1, -1):
        raise ValueError(f"step is 1 (down) or -1 (up), got {step}")
    if not first <= start < count:
        raise ValueError(f"start slice {start + 1} is outside the volume's slices {first + 1} to {count}")
    previous = np.asarray(mask, bool)
    previous_low = low_res
    last = start
    level = None if settings.max_level_change is None else mean_level(pixels(start), previous)
    for index in range(start + step, start + step * (settings.max_slices + 1), step):
        if not first <= index < count:
            yield PropagationEnd(last, "reached the last slice" if step > 0 else "reached the first slice")
            return
        if stop():
            yield PropagationEnd(last, "stopped")
            return
        box = grown_box(previous, settings.margin_px)
        if box is None:
            yield PropagationEnd(last, f"the mask on slice {last + 1} is empty: nothing to carry")
            return
        try:
            found, image = _next_slice(model, pixels, index, box, previous, previous_low, key, settings)
        except PromptError as exc:
            yield PropagationEnd(last, f"slice {index + 1}: {exc}")
            return
        why = end_reason(found, int(previous.sum()), index, settings) or \
            level_reason(level, mean_level(image, found.mask), index, settings) or \
            outside_reason(found.mask, previous, index, settings)
        if why is not None:
            yield PropagationEnd(last, why)
            return
        yield found
        previous, previous_low, last = found.mask, found.low_res, index
    yield PropagationEnd(last, f"reached the limit of {settings.max_slices} slices")


def _next_slice(model: PromptModel, pixels: Callable[[int], np.ndarray], index: int, box: Box,
                previous: np.ndarray, low_res: np.ndarray | None, key: Callable[[int], Hashable] | None,
                settings: PropagationSettings) -> tuple[PropagatedSlice, np.ndarray]:
    image = pixels(index)
    embedding = model.embed(image, key=None if key is None else key(index))
    feed = None
    if settings.mask_input:  # an accepted mask without the decoder's logits (edited, grabCut): as SAM's logits
        feed = low_res if low_res is not None and low_res.shape[-2:] == (MASK_GRID, MASK_GRID) else \
            image_to_low_res(previous, embedding.geometry)
    points = [interior_point(previous)] if _center_point(model, settings) else []
    proposal = model.decode(embedding, points, box=box, mask_input=feed)
    mask, low = np.asarray(proposal.mask, bool), np.asarray(proposal.low_res, np.float32)
    if settings.connected:
        kept = continuing(mask, previous)
        dropped = mask & ~kept
        if dropped.any():  # nor fed back as mask_input: the next slice would find the neighbour again
            low = np.where(image_to_low_res(dropped, embedding.geometry) > 0, np.minimum(low, -8.0), low)
        mask = kept
    return PropagatedSlice(index, mask, float(proposal.iou), low.astype(np.float32)), image


def continuing(mask: np.ndarray, previous: np.ndarray) -> np.ndarray:
    """The parts (8-connected components) of `mask` that overlap `previous`: an object goes on from the slice
    before; a look-alike neighbour the decoder took in (the other lung) does not."""
    count, parts = cv2.connectedComponents(mask.astype(np.uint8), connectivity=8)
    if count <= 2:  # one part or none
        return mask if (mask & previous).any() else np.zeros_like(mask)
    touching = np.unique(parts[mask & previous])
    return np.isin(parts, touching[touching > 0])


def end_reason(found: PropagatedSlice, previous_area: int, index: int, settings: PropagationSettings) -> str | None:
    """Why `found` (slice `index`) ends the propagation, None when it goes on."""
    area = int(found.mask.sum())
    if area < settings.min_area_px:
        return f"the object ended at slice {index + 1} (area {area} px < {settings.min_area_px})"
    if math.isfinite(found.iou) and found.iou < settings.min_iou:
        return f"predicted IoU {found.iou:.2f} < {settings.min_iou:g} at slice {index + 1}"
    if previous_area > 0 and area > settings.max_area_ratio * previous_area:
        return (f"the area jumped at slice {index + 1} ({previous_area} → {area} px, more than "
                f"{settings.max_area_ratio:g}×)")
    return None


def level_reason(start_level: float | None, level: float, index: int, settings: PropagationSettings) -> str | None:
    """Why the mask's grey level on slice `index` ends the propagation, None when it goes on."""
    limit = settings.max_level_change
    if start_level is None or limit is None or not abs(level - start_level) > limit:
        return None
    return (f"the mask's grey level moved from {start_level:.0f} to {level:.0f} at slice {index + 1} (more than "
            f"{limit:g} from the accepted mask's)")


def outside_reason(mask: np.ndarray, previous: np.ndarray, index: int, settings: PropagationSettings) -> str | None:
    """Why `mask` (slice `index`) left the object, None when it goes on: more than `max_outside` of it lies further
    from `previous` than the band an object growing around itself can reach."""
    limit = settings.max_outside
    if limit is None or not mask.any() or not previous.any():
        return None
    fraction, band = outside_fraction(mask, previous)
    if not fraction > limit:
        return None
    return (f"the mask left the object at slice {index + 1}: {fraction:.0%} of it outside the previous slice's mask "
            f"grown by {band:.1f} px (more than {limit:.0%})")


def outside_fraction(mask: np.ndarray, previous: np.ndarray) -> tuple[float, float]:
    """(the fraction of `mask` further than the band from `previous`, the band in px). The band is 1 px (the
    boundary's own jitter) + twice the growth of the equivalent radius √(area/π) from `previous` to `mask`: a
    cross-section that grows around itself stays inside it, even one side growing twice the average (a lung towards
    its base), while one that moves sideways onto a neighbour does not. Measured on the demo pair: at most 1.5% on
    the test sphere, the CT sample's lung and a dark ball, grown or shrunk; 5% where it took in the slab."""
    growth = math.sqrt(float(mask.sum()) / math.pi) - math.sqrt(float(previous.sum()) / math.pi)
    band = _BAND_PX + _BAND_GROWTH * max(growth, 0.0)
    distance = cv2.distanceTransform((~previous).astype(np.uint8), cv2.DIST_L2, 5)
    return float((mask & (distance > band)).sum()) / float(mask.sum()), band


_BAND_PX = 1.0
_BAND_GROWTH = 2.0


def mean_level(image: np.ndarray, mask: np.ndarray) -> float:
    """The median grey level of `image` (every channel) under `mask`, nan for an empty mask: the median, so a
    mask that takes in a little of the surroundings (a box's corners) keeps its object's level."""
    if not mask.any():
        return math.nan
    return float(np.median(np.asarray(image)[mask]))


def interior_point(mask: np.ndarray) -> Point:
    """The pixel of `mask` farthest from its edge (its distance transform's peak): inside even a crescent."""
    distance = cv2.distanceTransform(np.pad(mask, 1).astype(np.uint8), cv2.DIST_L2, 5)[1:-1, 1:-1]
    y, x = np.unravel_index(int(np.argmax(distance)), distance.shape)
    return Point(float(x), float(y))


def _center_point(model: PromptModel, settings: PropagationSettings) -> bool:
    if settings.center_point is not None:
        return settings.center_point
    return not model.model_free


def grown_box(mask: np.ndarray, margin: int) -> Box | None:
    """The bounding box of `mask`'s pixels (pixel edges, x1/y1 exclusive) grown by `margin` each side, inside the
    image; None for an empty mask."""
    rows = np.flatnonzero(mask.any(axis=1))
    if rows.size == 0:
        return None
    cols = np.flatnonzero(mask.any(axis=0))
    h, w = mask.shape[:2]
    return Box(float(max(int(cols[0]) - margin, 0)), float(max(int(rows[0]) - margin, 0)),
               float(min(int(cols[-1]) + 1 + margin, w)), float(min(int(rows[-1]) + 1 + margin, h)))
