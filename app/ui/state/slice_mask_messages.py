"""Typed records between the Smart tool's propagation (app.ui.controllers.smart_propagation) and the inference
worker's SliceMasks (app.ui.workers.worker_slice_masks): the model's masks of the slices a propagation reached that
the reader never showed, made in the background so that each propagated slice is merged and saved without being
visited. A record of its own, not a ViewRequest: newest-wins drops a view the reader left, never these.

Frozen, so a record handed to another thread cannot change under its reader; Qt-free and numpy-free at run time
(the core's types are named for the type checker only), as app.ui.state.messages.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

    from app.io.volumes import Volume


@dataclass(frozen=True)
class SliceMasksRequest:
    """The model's masks of slices `frames` of the volume `path`, at the reader's `threshold` (None: the model's
    own) — each one the mask the slice's view would have, which editing it would start from."""

    request_id: int  # the propagation's
    path: str
    volume: Volume
    frames: tuple[int, ...]
    threshold: float | None = None


@dataclass(frozen=True)
class SliceMasksNow:
    """The window closes and waits: every slice still queued is made now, in this one call."""

    request_id: int


@dataclass(frozen=True)
class SliceMaskReady:
    request_id: int
    path: str
    frame: int
    mask: np.ndarray  # the model's labels of that slice, uint8, the slice's size


@dataclass(frozen=True)
class SliceMaskFailed:
    request_id: int
    path: str
    frame: int
    message: str  # one line: the slice could not be read or run
