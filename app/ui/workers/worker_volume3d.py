"""The inference worker's 3D model runs (Volume3DRunner, a collaborator that app.ui.workers.worker.InferenceWorker
composes and calls from its slots, on its thread): the 3D model over the whole volume shown, once per (volume,
model), with its progress; then each slice the reader asks for, and the whole volume's counts at the reader's
threshold, from that kept result (app.runs.folder.volume3d_view) — never a second model run."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from PySide6.QtCore import SignalInstance

    from app.inference.image.pipeline import Result
    from app.inference.model.session import ModelSession
    from app.runs.folder.volume3d_view import KeptPrediction
    from app.ui.state.messages import FillRequest, ViewRequest

log = logging.getLogger(__name__)


class Volume3DRunner:
    """The kept prediction of one volume (the one shown) under the loaded 3D model."""

    def __init__(self, *, progress: SignalInstance, counted: SignalInstance, failed: SignalInstance) -> None:
        """`progress`: the worker's volume_progress signal; `counted`, `failed`: its volume_counted and
        volume_count_failed (the whole-volume result is a VolumeCount, as a 2D model's counted volume)."""
        self._progress, self._counted, self._failed = progress, counted, failed
        self._kept: tuple[str, KeptPrediction] | None = None
        self._refused: tuple[str, Exception] | None = None  # (path, why) of a run that failed: not run again
        self._wanted: str | None = None  # the volume the window shows; a run for any other stops

    # -- from the GUI thread: plain attribute writes, read between batches --------------------------------------

    def want(self, path: str | None) -> None:
        """The volume the window shows now (None: none, or the reader cancelled its run)."""
        self._wanted = path

    # -- on the worker thread -----------------------------------------------------------------------------------

    def reset(self) -> None:
        """A new model: nothing kept from the old one."""
        self._kept = self._refused = None

    def fill(self, request: FillRequest, model: ModelSession, tuned: ModelSession,
             min_confidence: float | None) -> None:
        """The 3D model over the request's volume unless kept (`model`: the session; `tuned`: it at the reader's
        threshold), then the volume's counts, label volume and components at that threshold as a VolumeCount;
        a refusal or failure as a VolumeCountFailed, a stop as a VolumeProgress of stage "stopped"."""
        from app.inference.image.pipeline import Stopped
        from app.ui.state.messages import VolumeCount, VolumeCountFailed

        path = request.path
        try:
            kept = self._prediction(path, request, model)
            figures = kept.figures(spec=tuned.spec, min_confidence=min_confidence,
                                   tuned=request.threshold is not None)
        except Stopped:
            return
        except Exception as exc:
            from app.ui.workers.worker_batch import failure_line

            self._failed.emit(VolumeCountFailed(path, failure_line(Path(path), exc)))
            return
        self._counted.emit(VolumeCount(path, kept.depth, kept.depth, figures.voxels, figures.millilitres,
                                       labels=figures.labels, lesions=figures.lesions,
                                       lesions_why=figures.lesions_why))

    def slice_result(self, request: ViewRequest, tuned: ModelSession, min_confidence: float | None,
                     decode_ms: float) -> Result:
        """The request's slice from the kept prediction of its volume. SegLensError with the one line when the
        request is no volume's slice, or the volume's run was refused; `Stopped` when it was stopped (or never
        asked for: the window moved on before)."""
        from app.errors import SegLensError
        from app.inference.image.pipeline import Stopped
        from app.runs.folder.volume3d_view import needs_volume_line

        path = request.key.path
        if request.volume is None:
            raise SegLensError(needs_volume_line(tuned.spec))
        if self._refused is not None and self._refused[0] == path:
            raise self._refused[1]
        if self._kept is None or self._kept[0] != path:
            raise Stopped()
        return self._kept[1].slice_result(request.key.frame, spec=tuned.spec, min_confidence=min_confidence,
                                          tuned=request.tuning.threshold is not None, decode_ms=decode_ms)

    def _prediction(self, path: str, request: FillRequest, model: ModelSession) -> KeptPrediction:
        if self._kept is not None and self._kept[0] == path:
            return self._kept[1]
        if self._refused is not None and self._refused[0] == path:
            raise self._refused[1]
        from app.inference.image.pipeline import Stopped
        from app.runs.folder.volume3d_view import predict_kept
        from app.ui.state.messages import VolumeProgress

        if self._wanted != path:  # the window left it (or cancelled) before its run began: no run, no word
            raise Stopped()
        self._kept = self._refused = None  # the volume shown before is freed before this one takes memory
        try:
            kept = predict_kept(model, request.volume, should_stop=lambda: self._wanted != path,
                                progress=lambda stage, done, total: self._progress.emit(
                                    VolumeProgress(path, stage, done, total)))
        except Stopped:
            self._progress.emit(VolumeProgress(path, "stopped"))
            raise
        except Exception as exc:
            self._refused = (path, exc)
            raise
        self._kept = (path, kept)
        log.info("3D model: %d patches over %d slices in %.1f s", kept.prediction.patches, kept.depth, kept.seconds)
        self._progress.emit(VolumeProgress(path, "done", kept.prediction.patches, kept.prediction.patches,
                                           seconds=kept.seconds))
        return kept
