"""The inference worker's whole-volume count (VolumeCounter, a collaborator that
app.ui.workers.worker.InferenceWorker composes and calls from its slots, on its thread): the rest of a volume's
slices counted a few at a time between the reader's requests, for the legend's mL."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import QTimer

if TYPE_CHECKING:
    import numpy as np
    from PySide6.QtCore import SignalInstance

    from app.inference.decide.lesions import Lesion
    from app.inference.image.pipeline import Result
    from app.inference.model.session import ModelSession
    from app.io.decoded import DecodedImage
    from app.runs.view.fill import VolumeFill
    from app.ui.state.messages import FillRequest, ViewRequest

log = logging.getLogger(__name__)


class VolumeCounter:
    """The count of the volume shown; its steps are queued on the thread that calls `fill` (the worker's)."""

    def __init__(self, tuned: Callable[[float | None], tuple[ModelSession, float | None]], *,
                 counted: SignalInstance, failed: SignalInstance) -> None:
        """`tuned`: the worker's session for a threshold; `counted`, `failed`: its volume_counted and
        volume_count_failed signals (the window connects to the worker's)."""
        self._tuned = tuned
        self._counted, self._failed = counted, failed
        self._fill: VolumeFill | None = None  # of the volume shown, counted between requests
        self._key: tuple[str, float | None] | None = None  # (path, threshold) it counts for
        # (label volume, its components, why none) of the last whole count
        self._components: tuple[np.ndarray, tuple[Lesion, ...] | None, str] | None = None

    def reset(self) -> None:
        """A new model: nothing counted with the old one is kept."""
        self._fill = self._key = self._components = None

    def fill(self, request: FillRequest) -> None:
        """Count every slice of the request's volume (per-class voxels and mL for the legend) a few slices at a
        time; a request for a picture that arrives meanwhile is served first (each step is queued behind it)."""
        path, volume, threshold = request.path, request.volume, request.threshold
        key = (path, threshold)
        fill = self._fill
        if fill is None or self._key != key:
            from app.runs.view.fill import VolumeFill

            model, min_confidence = self._tuned(threshold)
            self._fill = fill = VolumeFill(model, volume, min_confidence=min_confidence)
            self._key = key
        self._emit_counts(fill, path)
        if not fill.complete:
            QTimer.singleShot(0, self._step)

    def stop(self) -> None:
        """Called from the GUI thread: the reader left the volume (a plain attribute write)."""
        self._key = None

    def add(self, path: str, threshold: float | None, frame: int, result: Result) -> None:
        """A slice the reader's request ran: the count need not run it again (when it counts that volume; the
        full-size mask is made only then)."""
        fill = self._fill
        if fill is not None and self._key == (path, threshold) and (mask := result.mask) is not None:
            fill.add(frame, mask)

    def _step(self) -> None:
        # the key is read once: the GUI thread may drop it (stop) at any moment
        fill, key = self._fill, self._key
        if fill is None or key is None or fill.complete:
            return
        try:
            fill.step()  # a slice that cannot be read or run is recorded there (fill.failure), not raised
        except Exception as exc:  # anything else stops the count as well, and says so: never a partial figure
            missing = fill.missing()
            fill.fail(missing[0] if missing else 0, exc)
        if fill.failure is not None:
            from app.logs import private

            private(log, logging.WARNING, key[0], f"counting {key[0]} failed: {fill.failure_line()}")
        if self._fill is fill and self._key == key:
            self._emit_counts(fill, key[0])
            if not fill.complete:
                QTimer.singleShot(0, self._step)

    def _emit_counts(self, fill: VolumeFill, path: str) -> None:
        """The legend's counts so far, or, once a slice failed, why the count failed (no partial figures)."""
        from app.ui.state.messages import VolumeCount, VolumeCountFailed

        if fill.failure is not None:
            self._failed.emit(VolumeCountFailed(path, fill.failure_line()))
            return
        labels = fill.labels() if fill.complete else None
        found, why = self._lesions(fill, labels)
        self._counted.emit(VolumeCount(path, fill.done, fill.total, fill.totals(), fill.millilitres(),
                                       labels=labels, lesions=found, lesions_why=why))

    def _lesions(self, fill: VolumeFill, labels: np.ndarray | None) -> tuple[tuple[Lesion, ...] | None, str]:
        """The whole label volume's 3D components (the lesion list), found once per label volume."""
        if labels is None:
            return None, ""
        if self._components is None or self._components[0] is not labels:
            from app.runs.folder.lesions import volume_components

            self._components = (labels, *volume_components(fill.volume, labels))
        return self._components[1], self._components[2]


def decode_request(request: ViewRequest) -> tuple[DecodedImage, float]:
    """The picture a request names: a volume's slice (app.io.volumes), or a file's frame; and its decode time."""
    from app.inference.image import pipeline

    if request.volume is None:
        return pipeline.decode(request.key.path, frame=request.key.frame)
    import time

    from app.io.images import read_slice

    started = time.perf_counter()
    image = read_slice(request.volume, request.key.frame)
    return image, (time.perf_counter() - started) * 1000


