"""The inference worker's 3D model runs (Volume3DRunner, a collaborator that app.ui.workers.worker.InferenceWorker
composes and calls from its slots, on its thread): the 3D model over the whole volume shown, once per (volume,
model, settings) for the session, with its progress; then each slice the reader asks for, and the whole volume's
counts at the reader's threshold, from that kept result (app.runs.view.result3d) — never a second model run.
The results are kept least recently used first out, within KEPT_BYTES, so a reader going back to a volume sees its
result at once."""

from __future__ import annotations

import logging
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from PySide6.QtCore import SignalInstance

    from app.inference.image.pipeline import Result
    from app.inference.model.session import ModelSession
    from app.runs.view.result3d import KeptPrediction
    from app.ui.state.messages import FillRequest, ViewRequest

log = logging.getLogger(__name__)

# The 3D results kept for the session (label volumes and float16 probabilities): a 512 × 512 × 300 CT under a
# binary model holds ~240 MB, so about eight such volumes; the least recently used goes first, and the volume being
# run always stays (a single result larger than this is kept alone).
KEPT_BYTES = 2 << 30
ModelKey = tuple[object, ...]  # what makes two runs of one volume give the same result (model_key)


class Volume3DRunner:
    """The kept prediction of one volume (the one shown) under the loaded 3D model."""

    def __init__(self, *, progress: SignalInstance, counted: SignalInstance, failed: SignalInstance) -> None:
        """`progress`: the worker's volume_progress signal; `counted`, `failed`: its volume_counted and
        volume_count_failed (the whole-volume result is a VolumeCount, as a 2D model's counted volume)."""
        self._progress, self._counted, self._failed = progress, counted, failed
        self._kept: OrderedDict[tuple[str, ModelKey], KeptPrediction] = OrderedDict()  # the newest last
        self._model: ModelKey | None = None  # of the session the last fill ran with (None: none since reset)
        self._refused: tuple[str, Exception] | None = None  # (path, why) of a run that failed: not run again
        self._wanted: str | None = None  # the volume the window shows; a run for any other stops

    # -- from the GUI thread: plain attribute writes, read between batches --------------------------------------

    def want(self, path: str | None) -> None:
        """The volume the window shows now (None: none, or the reader cancelled its run)."""
        self._wanted = path

    # -- on the worker thread -----------------------------------------------------------------------------------

    def reset(self) -> None:
        """A new model is loaded: its slices are asked for only after its first fill. The kept results stay (each
        is keyed by its model and settings): going back to a model finds them."""
        self._model = self._refused = None

    @property
    def kept_bytes(self) -> int:
        return sum(kept.nbytes for kept in self._kept.values())

    def fill(self, request: FillRequest, model: ModelSession, tuned: ModelSession,
             min_confidence: float | None) -> None:
        """The 3D model over the request's volume unless kept (`model`: the session; `tuned`: it at the reader's
        threshold), then the volume's counts, label volume and components at that threshold as a VolumeCount;
        a refusal or failure as a VolumeCountFailed, a stop as a VolumeProgress of stage "stopped"."""
        from app.inference.image.pipeline import Stopped
        from app.ui.state.messages import VolumeCount, VolumeCountFailed

        path = request.path
        self._model = model_key(model)
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
        from app.runs.view.result3d import needs_volume_line

        path = request.key.path
        if request.volume is None:
            raise SegLensError(needs_volume_line(tuned.spec))
        if self._refused is not None and self._refused[0] == path:
            raise self._refused[1]
        key = (path, self._model) if self._model is not None else None
        kept = self._kept.get(key) if key is not None else None
        if key is None or kept is None:
            raise Stopped()
        self._kept.move_to_end(key)
        return kept.slice_result(request.key.frame, spec=tuned.spec, min_confidence=min_confidence,
                                          tuned=request.tuning.threshold is not None, decode_ms=decode_ms)

    def _prediction(self, path: str, request: FillRequest, model: ModelSession) -> KeptPrediction:
        key = (path, model_key(model))
        if (found := self._kept.get(key)) is not None:
            self._kept.move_to_end(key)
            return found
        if self._refused is not None and self._refused[0] == path:
            raise self._refused[1]
        from app.inference.image.pipeline import Stopped
        from app.runs.view.result3d import predict_kept
        from app.ui.state.messages import VolumeProgress

        if self._wanted != path:  # the window left it (or cancelled) before its run began: no run, no word
            raise Stopped()
        self._refused = None
        self._make_room(estimated_bytes(model, request))  # before this one takes memory
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
        self._kept[key] = kept
        self._make_room(0)
        log.info("3D model: %d patches over %d slices in %.1f s", kept.prediction.patches, kept.depth, kept.seconds)
        self._progress.emit(VolumeProgress(path, "done", kept.prediction.patches, kept.prediction.patches,
                                           seconds=kept.seconds))
        return kept

    def _make_room(self, needed: int) -> None:
        """The least recently used results go until those kept and `needed` more bytes fit in KEPT_BYTES; the
        newest (the volume just run) always stays when nothing is needed."""
        keep = 0 if needed else 1
        while len(self._kept) > keep and self.kept_bytes + needed > KEPT_BYTES:
            self._kept.popitem(last=False)


def model_key(model: ModelSession) -> ModelKey:
    """The model and its settings as a run's result depends on them: its spec (the sidecar's patch, TTA,
    normalisation, threshold…), where it runs, and the model file itself (another export under the same name)."""
    spec, info = model.spec, model.info
    try:
        stat = spec.path.stat()
        file: tuple[int, int] = (stat.st_mtime_ns, stat.st_size)
    except OSError:  # a model served elsewhere: its name and spec say which
        file = (0, 0)
    return spec, info.provider, info.requested, file


def estimated_bytes(model: ModelSession, request: FillRequest) -> int:
    """What the request's result will hold once kept: its labels (uint8) and probabilities (float16, one plane
    per channel the model's blend keeps) over the volume's voxels."""
    from app.inference.volume3d.predict import output_classes

    volume = request.volume
    voxels = volume.depth * volume.rows * volume.columns
    return voxels * (1 + 2 * output_classes(model.spec))
