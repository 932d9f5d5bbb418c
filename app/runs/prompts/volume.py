"""A prompt on one slice of a volume, carried to the others (app.runs.prompts.propagate): the label volume
`seglens-cli prompt PROMPT_MODEL VOLUME --slice K … --propagate both` writes as NIfTI with the volume's geometry.

The encoder sees each slice as the viewer shows it by default: the real values through the series' own window
(its first slice's WindowCenter/Width, else an automatic window shared by every slice: app.io.volumes), RGB and
8-bit images as they are. A 4D NIfTI's slices are (time point, slice) pairs: propagation stays inside slice K's
time point.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from app.inference.prompt.request import Box, Point, PromptError, PromptModel
from app.io.images import pixel_limit, read_slice
from app.io.limits import check_decoded, volume_bytes_limit
from app.io.volumes import Volume
from app.runs.prompts.propagate import PropagatedSlice, PropagationEnd, PropagationSettings, propagate

STEPS = {"down": 1, "up": -1}  # down: towards the last slice (K+1, K+2, …), up: towards the first
DIRECTIONS = ("both", "down", "up")


@dataclass(frozen=True)
class DirectionEnd:
    """How one direction went: its name ("down": towards the last slice, "up": towards the first), the slices
    given a mask (0-based, in order) and why it ended."""

    direction: str
    slices: tuple[int, ...]
    end: PropagationEnd


@dataclass(frozen=True)
class VolumePrompt:
    labels: np.ndarray  # uint8 [depth, rows, columns]: 1 on the object, the volume's slice order
    start: int  # the prompted slice, 0-based
    iou: float  # the decoder's predicted IoU on the prompted slice (nan for grabcut)
    directions: tuple[DirectionEnd, ...]

    @property
    def slices(self) -> tuple[int, ...]:
        """The slices with voxels of the object (0-based, ascending)."""
        return tuple(int(k) for k in np.flatnonzero(self.labels.reshape(len(self.labels), -1).any(axis=1)))


def prompt_volume(model: PromptModel, volume: Volume, *, start: int, points: Sequence[Point] = (),
                  box: Box | None = None, propagate_to: str | None = None,
                  settings: PropagationSettings | None = None,
                  on_slice: Callable[[PropagatedSlice], None] | None = None) -> VolumePrompt:
    """Slice `start` (0-based) prompted with `points` / `box`, then carried `propagate_to` ("down", "up",
    "both"; None: that slice only). Raises PromptError in one line for a slice outside the volume or a prompt
    outside the slice; ImageError for a slice that cannot be read or a label volume over the limit."""
    if not 0 <= start < volume.depth:
        raise PromptError(f"{volume.source}: --slice {start + 1} is outside the volume (slices 1 to {volume.depth})")
    shape = (volume.depth, volume.rows, volume.columns)
    check_decoded(volume.source, shape, 1, volume_bytes_limit(pixel_limit()), dtype="uint8", what="label volume")
    per = volume.depth // max(1, volume.time_points)  # a 4D NIfTI: stay in slice K's time point
    base = start - start % per

    def pixels(i: int) -> np.ndarray:
        return read_slice(volume, i).display()

    def key(i: int) -> tuple[str, str, int]:
        # the session's cache outlives this call: slice i alone was slice i of any volume the session prompted
        return str(volume.source), volume.key, i

    try:
        proposal = model.decode(model.embed(pixels(start), key=key(start)), points, box=box)
    except PromptError as exc:
        raise PromptError(f"{volume.source}: slice {start + 1}: {exc}") from exc
    labels = np.zeros(shape, np.uint8)
    labels[start][proposal.mask] = 1
    ends = []
    for direction in _directions(propagate_to):
        given: list[int] = []
        for record in propagate(model, pixels, start=start, mask=proposal.mask, low_res=proposal.low_res,
                                step=STEPS[direction], count=base + per, key=key,
                                settings=settings or PropagationSettings(), first=base):
            if isinstance(record, PropagationEnd):
                ends.append(DirectionEnd(direction, tuple(given), record))
                break
            labels[record.index][record.mask] = 1
            given.append(record.index)
            if on_slice is not None:
                on_slice(record)
    return VolumePrompt(labels, start, float(proposal.iou), tuple(ends))


def _directions(propagate_to: str | None) -> tuple[str, ...]:
    if propagate_to is None:
        return ()
    if propagate_to not in DIRECTIONS:
        raise ValueError(f"propagate_to is one of {', '.join(DIRECTIONS)}, got {propagate_to!r}")
    return ("down", "up") if propagate_to == "both" else (propagate_to,)
