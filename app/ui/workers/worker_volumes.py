"""The inference worker's whole-volume count (a mixin of app.ui.workers.worker.InferenceWorker, on its thread): the
rest of a volume's slices counted a few at a time between the reader's requests, for the legend's mL."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from PySide6.QtCore import QTimer, Slot

if TYPE_CHECKING:
    from app.ui.state.messages import ViewRequest

log = logging.getLogger("app.ui.workers.worker")


class VolumeFillSlots:
    """Slots of InferenceWorker (its `_model`, `_tuned`, `volume_counted` signal); run on the worker thread."""

    @Slot(object, object, object)
    def fill_volume(self, path: str, volume, threshold: float | None) -> None:
        """Count every slice of `volume` (per-class voxels and mL for the legend) a few slices at a time; a
        request for a picture that arrives meanwhile is served first (each step is queued behind it)."""
        if self._model is None or volume is None:
            return
        key = (path, threshold)
        if self._fill_key != key:
            from app.runs.volume_fill import VolumeFill

            model, min_confidence = self._tuned(threshold)
            self._fill, self._fill_key = VolumeFill(model, volume, min_confidence=min_confidence), key
        self._emit_counts(path)
        if not self._fill.complete:
            QTimer.singleShot(0, self._fill_step)

    def stop_fill(self) -> None:
        """Called from the GUI thread: the reader left the volume (a plain attribute write)."""
        self._fill_key = None

    def _fill_step(self) -> None:
        # the key is read once: the GUI thread may drop it (stop_fill) at any moment
        fill, key = self._fill, self._fill_key
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
        if self._fill is fill and self._fill_key == key:
            self._emit_counts(key[0])
            if not fill.complete:
                QTimer.singleShot(0, self._fill_step)

    def _emit_counts(self, path: str) -> None:
        """The legend's counts so far, or, once a slice failed, why the count failed (no partial figures)."""
        fill = self._fill
        if fill.failure is not None:
            self.volume_count_failed.emit(path, fill.failure_line())
            return
        self.volume_counted.emit(path, fill.done, fill.total, fill.totals(), fill.millilitres())



def decode_request(request: ViewRequest):
    """The picture a request names: a volume's slice (app.io.volumes), or a file's frame; and its decode time."""
    from app.inference import pipeline

    if request.volume is None:
        return pipeline.decode(request.key.path, frame=request.key.frame)
    import time

    from app.io.images import read_slice

    started = time.perf_counter()
    image = read_slice(request.volume, request.key.frame)
    return image, (time.perf_counter() - started) * 1000


