"""The inference worker's masks of slices nobody showed (SliceMasks, a child QObject of
app.ui.workers.worker.InferenceWorker, so it lives on that worker's thread and runs its sessions there): a
propagation of the Smart tool reached slices whose model masks the window does not have, and each one's correction
is that mask with the propagated mask painted in. They are made one slice per turn of the thread's event loop,
behind the reader's requests (a slice asked for is served after at most one of these), and never dropped by the
newest-wins rule of views: their requests are their own (app.ui.state.slice_mask_messages).

Each mask is made exactly as the slice's view makes it (InferenceWorker._view): the slice read by read_slice, the
session at the reader's threshold (`tuned`), pipeline.run_image, a multi-class model relabelled at its minimum
confidence; a 3D model's slice from its kept run over the volume (Volume3DRunner.slice_result).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, QTimer, Signal, Slot

if TYPE_CHECKING:
    import numpy as np

    from app.inference.model.session import ModelSession
    from app.ui.state.messages import ViewRequest
    from app.ui.state.slice_mask_messages import SliceMasksNow, SliceMasksRequest
    from app.ui.workers.worker_volume3d import Volume3DRunner
    from app.ui.workers.worker_volumes import VolumeCounter

log = logging.getLogger(__name__)


class SliceMasks(QObject):
    """The slices asked for, in order; each answered with a SliceMaskReady or a SliceMaskFailed."""

    ready = Signal(object)  # slice_mask_messages.SliceMaskReady
    failed = Signal(object)  # slice_mask_messages.SliceMaskFailed

    def __init__(self, tuned: Callable[[float | None], tuple[ModelSession, float | None]], *,
                 counter: VolumeCounter, volumes3d: Volume3DRunner, parent: QObject) -> None:
        """`tuned`: the worker's session at a threshold; `counter`: its whole-volume count (a slice made here is
        not run again there); `volumes3d`: its 3D runs; `parent`: the worker (this moves to its thread with it)."""
        super().__init__(parent)
        self._tuned, self._counter, self._volumes3d = tuned, counter, volumes3d
        self._queue: deque[tuple[SliceMasksRequest, int]] = deque()
        self._scheduled = False

    @property
    def queued(self) -> int:
        """Slices asked for and not answered yet (tests; a plain read)."""
        return len(self._queue)

    @Slot(object)
    def make(self, request: SliceMasksRequest) -> None:
        """Queue the request's slices; they are made one per turn of the event loop."""
        self._queue.extend((request, frame) for frame in request.frames)
        self._schedule()

    @Slot(object)
    def make_now(self, request: SliceMasksNow) -> None:
        """Every slice still queued, made in this call (the window closes and waits for them)."""
        while self._queue:
            self._one()

    def _schedule(self) -> None:
        if self._queue and not self._scheduled:
            self._scheduled = True
            QTimer.singleShot(0, self, self._step)

    def _step(self) -> None:
        self._scheduled = False
        if self._queue:
            self._one()
        self._schedule()

    def _one(self) -> None:
        from app.ui.state.slice_mask_messages import SliceMaskFailed, SliceMaskReady

        request, frame = self._queue.popleft()
        try:
            mask = self._mask(request, frame)
        except Exception as exc:  # the slice stays unsaved, and the window says so; the thread goes on
            from app.ui.workers.worker_batch import failure_line

            self.failed.emit(SliceMaskFailed(request.request_id, request.path, frame,
                                             failure_line(Path(request.path), exc)))
            return
        self.ready.emit(SliceMaskReady(request.request_id, request.path, frame, mask))

    def _mask(self, request: SliceMasksRequest, frame: int) -> np.ndarray:
        """The model's labels of slice `frame`, as its view would have them."""
        from app.errors import SegLensError
        from app.inference.image import pipeline
        from app.io.images import read_slice

        try:
            model, min_confidence = self._tuned(request.threshold)
        except RuntimeError as exc:  # no model: the one that replaced it failed to open
            raise SegLensError(str(exc)) from None
        if model.spec.is_3d:
            try:
                result = self._volumes3d.slice_result(_view_request(request, frame), model, min_confidence, 0.0)
            except pipeline.Stopped:  # its run is kept for the volume shown only
                raise SegLensError("the 3D model's run over this volume is not kept: saved once the slice is "
                                   "shown") from None
        else:
            result = pipeline.run_image(model, read_slice(request.volume, frame))
            if min_confidence is not None:
                result = pipeline.relabel(result, spec=model.spec, min_confidence=min_confidence)
            self._counter.add(request.path, request.threshold, frame, result)
        if result.mask is None:
            raise SegLensError("the model gives no mask (a classifier): a slice's correction is a mask")
        return result.mask


def _view_request(request: SliceMasksRequest, frame: int) -> ViewRequest:
    """The view request the slice would have had, for a 3D model's kept run (only its key, volume and threshold
    count there)."""
    from app.ui.state.messages import Tuning, ViewKey, ViewRequest

    return ViewRequest(0, ViewKey(request.path, frame), tuning=Tuning(threshold=request.threshold),
                       volume=request.volume)
