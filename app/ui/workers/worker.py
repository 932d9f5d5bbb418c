"""InferenceWorker: one QObject living in one long-lived QThread that owns the model sessions (A, and B when
comparing): each a ModelSession, local ONNX Runtime or a remote server, held as that protocol.

A session is created, warmed up and run only on that thread (inside slots). Requests come in through queued signals
as `messages.ViewRequest`s with ids; a request older than the newest one is dropped unprocessed (the newest id is the
window's, a `LatestRequest` its ViewState shares with this worker), so stepping quickly through a folder never builds a
backlog. Failures come back as signals with a one-line message — never swallowed, never the thread's end.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal, Slot

from app.runs.review.ground_truth import References
from app.ui.state.view_state import LatestRequest
from app.ui.workers.views import bare_picture, decided, display_labels, display_mask, settled, view_result
from app.ui.workers.worker_batch import BatchJobs, BatchSignals, failure_line, ground_truth, model_b_error_line, tuned
from app.ui.workers.worker_slice_masks import SliceMasks
from app.ui.workers.worker_volume3d import Volume3DRunner
from app.ui.workers.worker_volumes import VolumeCounter, decode_request

if TYPE_CHECKING:  # messages loads in the slots, after the window shows (its dataclasses cost ~4 ms)
    from app.inference.model.runtime_options import RuntimeOptions
    from app.inference.model.session import ModelSession, SessionInfo
    from app.inference.model.spec import ModelSpec
    from app.io.decoded import DecodedImage
    from app.ui.state.messages import (
        BarePicture,
        CompareAllRequest,
        FillRequest,
        LoadRequest,
        ModelBRequest,
        ReportRequest,
        RetuneRequest,
        RunAllRequest,
        ViewKey,
        ViewRequest,
        ViewResult,
    )
    from app.ui.state.remote_messages import RemoteRetrying


log = logging.getLogger(__name__)


class InferenceWorker(QObject):
    """The sessions and every slot that runs them. Run on all, the review report, Compare all (BatchJobs) and the
    whole-volume count (VolumeCounter) are collaborators it calls from its slots, on this thread, answering on its
    signals; `slice_masks` (a propagation's unshown slices, worker_slice_masks) is a child with its own slots."""

    # each signal carries one typed frozen record of app.ui.state.messages (its request id inside, where it has one)
    model_ready = Signal(object)  # ModelSummary (its generation: the LoadRequest's)
    model_failed = Signal(object)  # ModelFailed
    result_ready = Signal(object)  # ViewResult (its request_id: the ViewRequest's)
    retuned = Signal(object)  # ViewResult decided and drawn again from its kept scores (request_id: the retune's)
    failed = Signal(object)  # ViewFailed
    skipped = Signal(object)  # ViewSkipped: dropped unprocessed, the window had moved on
    tile_progress = Signal(object)  # TileProgress (a tiled image, input.resize: tile)
    batch_progress = Signal(object)  # BatchProgress
    batch_finished = Signal(object)  # BatchFinished
    report_finished = Signal(object)  # ReportFinished
    model_b_ready = Signal(object)  # ModelSummary of the second model (None: comparing ended)
    model_b_failed = Signal(object)  # ModelBFailed
    agreement_ready = Signal(object)  # AgreementMeasured (compare_all)
    compare_finished = Signal(object)  # CompareFinished
    volume_counted = Signal(object)  # messages.VolumeCount: the whole-volume legend so far (fill_volume)
    volume_count_failed = Signal(object)  # messages.VolumeCountFailed: the slice that failed, and why
    volume_progress = Signal(object)  # messages.VolumeProgress: a 3D model's run over the volume (fill_volume)
    remote_retrying = Signal(object)  # remote_messages.RemoteRetrying: a remote session waits before another try
    remote_timed = Signal(object)  # remote_messages.RemoteLatency: a picture's requests to the server

    def __init__(self, *, latest: LatestRequest | None = None, latest_tune: LatestRequest | None = None) -> None:
        """`latest`, `latest_tune`: the window's holders of the newest view and retune ids (ViewState), shared so
        that a request the window no longer wants is skipped here; a driver without a window passes its own."""
        super().__init__()
        self._model: ModelSession | None = None
        self._options: RuntimeOptions | None = None
        self._latest = latest if latest is not None else LatestRequest()
        self._latest_tune = latest_tune if latest_tune is not None else LatestRequest()
        self._image_waiting = False
        self._waiting_key: ViewKey | None = None  # the file picture waiting for the model, decoded once it's built
        # (ViewKey, DecodedImage, decode ms) of that picture, taken by the next process_view
        self._decoded: tuple[ViewKey, DecodedImage, float] | None = None
        self._in_run: tuple[ViewKey, DecodedImage] | None = None  # the picture process_view is running (its failure
        # and a remote session's retries show it: bare_picture)
        self._cancel = threading.Event()
        self.session_threads: list[int] = []  # ident of the thread each session was created on (tests, logs)
        self._references = References()  # each image's reference, each reference folder walked once
        self._depths: dict[str, int] = {}  # a volume's depth by path, for its slices' own corrections (_compared)
        self._model_b: ModelSession | None = None  # the second model of Model ▸ Compare with another model
        # plain objects (no thread affinity): they run where the slots calling them run, on this worker's thread
        self._jobs = BatchJobs(BatchSignals(self.batch_progress, self.batch_finished, self.report_finished,
                                            self.agreement_ready, self.compare_finished),
                               cancel=self._cancel, session_threads=self.session_threads,
                               references=self._references)
        self._volumes = VolumeCounter(self._tuned, counted=self.volume_counted, failed=self.volume_count_failed)
        self._volumes3d = Volume3DRunner(progress=self.volume_progress, counted=self.volume_counted,
                                         failed=self.volume_count_failed)
        self.slice_masks = SliceMasks(self._tuned, counter=self._volumes, volumes3d=self._volumes3d, parent=self)

    # -- read on the GUI thread (tests, dialogs): plain attribute reads, safe under the GIL --------------

    @property
    def session_info(self) -> SessionInfo | None:
        """SessionInfo of the interactive session, None until one is loaded."""
        return self._model.info if self._model is not None else None

    @property
    def batch_session_threads(self) -> int | None:
        """Intra-op threads of the separate session Run on all uses on the CPU; None while it uses the
        interactive one (on a GPU, threads chosen by the user, a single core, or before the first run)."""
        return self._jobs.session_threads_in_use

    # -- called from the GUI thread --------------------------------------------------------------------

    def note_image_waiting(self, key: ViewKey | None = None) -> None:
        """An image is waiting for the model being loaded: its own run will warm the session up (one run sooner
        to the first overlay than a run on zeros followed by the image's). `key`: that picture, when it is a
        file's (messages.ViewKey; None for a volume's slice) — decoded here as soon as the session is built,
        while the window answers `model_ready` with its request, instead of after it."""
        self._image_waiting = True
        self._waiting_key = key

    def cancel_remote(self) -> None:
        """A remote session's request in flight (or its wait before another try) given up now: the model is being
        replaced or the window closes, so neither waits out the server's timeout (worker_open.cancel_requests)."""
        from app.ui.workers.worker_open import cancel_requests

        cancel_requests(self._model)

    def cancel_batch(self) -> None:
        """Cancel: Run on all, the review report, Compare all — and a 3D model's run (closing the window)."""
        self._cancel.set()
        self._volumes3d.want(None)

    def stop_fill(self) -> None:
        """The reader left the volume: its count stops (a plain attribute write)."""
        self._volumes.stop()

    def want_volume(self, path: str | None) -> None:
        """The volume shown (None: none, or its 3D run cancelled): a 3D run for any other stops between batches."""
        self._volumes3d.want(path)

    # -- slots: run on the worker thread ---------------------------------------------------------------

    @Slot(object)
    def load_model(self, request: LoadRequest) -> None:
        """Build the session here, on the worker thread."""
        from app.errors import SegLensError

        # OpenCV and Pillow too: an extension module's import holds the GIL (and so stalls the GUI) throughout;
        # better while "loading model…" shows than when the user opens a folder
        from app.inference.image import pipeline  # noqa: F401
        from app.ui.state.messages import ModelFailed, ModelSummary
        from app.ui.workers.worker_open import decode_ahead, model_digest, open_model, release, said

        generation, model_path = request.generation, request.model_path
        release(self._model)  # the old sessions are released before the new one takes memory (a remote's link)
        self._model = None
        self._jobs.forget_session()
        self._volumes.reset()
        self._volumes3d.reset()
        if self._model_b is not None:  # a comparison was with the old model
            self._model_b = None
            self.model_b_ready.emit(None)
        try:
            model, options = open_model(request, on_retry=self._retrying)  # worker_open: local or remote
            spec = model.spec
            waiting, self._image_waiting = self._image_waiting, False
            waiting_key, self._waiting_key, self._decoded = self._waiting_key, None, None
            if not waiting:
                model.warm_up()
        except (SegLensError, ValueError) as exc:
            self.model_failed.emit(ModelFailed(generation, said(exc)))  # a remote one with the viewer's advice
            return
        except Exception as exc:
            from app.errors import unexpected_error_line
            from app.logs import log_exception

            log_exception(log, logging.ERROR, f"loading the model {Path(model_path).name} failed", exc)
            self.model_failed.emit(ModelFailed(generation, unexpected_error_line(Path(model_path), exc)))
            return
        self._model, self._options = model, options
        self.session_threads.append(threading.get_ident())
        log.info("model %s on %s (requested %s)%s", spec.path.name, model.info.provider, model.info.requested,
                 f": {model.info.fallback_reason}" if model.info.fallback_reason else "")
        # as the session runs it; hashed here, not on the GUI thread (a model is hundreds of MB)
        self.model_ready.emit(ModelSummary(model.spec, model.info, model_digest(model), generation))
        if waiting_key is not None:  # decoded while the window turns `model_ready` into its request
            self._decoded = decode_ahead(waiting_key)

    @Slot(object)
    def load_model_b(self, request: ModelBRequest) -> None:
        """Open (and warm) a second session on this thread, for comparing with the first; a path "" ends comparing.
        Both sessions stay loaded: on a GPU both on the device when its memory allows (else the second one's
        SessionInfo says where it runs and why)."""
        from app.errors import SegLensError
        from app.inference.model.builder import load_spec
        from app.inference.model.runtime_options import RuntimeOptions, parse_runtime_arguments
        from app.inference.runtime.session import open_session
        from app.runs.compare.agreement import compare_problem
        from app.ui.state.messages import ModelBFailed, ModelSummary

        self._model_b = None
        model_path = request.model_path
        if not model_path:
            self.model_b_ready.emit(None)
            return
        try:
            spec = load_spec(model_path)
            refused = compare_problem(self._model.spec, spec) if self._model is not None else "no model is loaded"
            if refused:
                self.model_b_failed.emit(ModelBFailed(refused))
                return
            options = parse_runtime_arguments([p for p in request.runtime.split(";") if p.strip()])
            if "device_argmax" not in options.given:  # as for model A: its mask is compared, its scores kept
                options = options.merged(RuntimeOptions.written({"device_argmax": "off"}))
            self._model_b = open_session(spec, request.device, runtime=options)
        except (SegLensError, ValueError) as exc:
            self.model_b_failed.emit(ModelBFailed(str(exc)))
            return
        except Exception as exc:
            from app.errors import unexpected_error_line
            from app.logs import log_exception

            log_exception(log, logging.ERROR, f"loading model B {Path(model_path).name} failed", exc)
            self.model_b_failed.emit(ModelBFailed(unexpected_error_line(Path(model_path), exc)))
            return
        self.session_threads.append(threading.get_ident())
        self.model_b_ready.emit(ModelSummary(spec, self._model_b.info))

    @Slot(object)
    def run_all(self, request: RunAllRequest) -> None:
        """Run on all (worker_batch.BatchJobs.run_all)."""
        self._jobs.run_all(self._model, self._options, request)

    @Slot(object)
    def export_report(self, request: ReportRequest) -> None:
        """The review report (worker_batch.BatchJobs.export_report)."""
        self._jobs.export_report(self._model, request)

    @Slot(object)
    def compare_all(self, request: CompareAllRequest) -> None:
        """Both models on every listed input (worker_batch.BatchJobs.compare_all)."""
        self._jobs.compare_all(self._model, self._model_b, request.entries)

    @Slot(object)
    def fill_volume(self, request: FillRequest) -> None:
        """Count every slice of the volume shown, between requests (VolumeCounter.fill); a 3D model runs once."""
        if self._model is not None and self._model.spec.is_3d:
            self._volumes3d.fill(request, self._model, *self._tuned(request.threshold))
        elif self._model is not None:
            self._volumes.fill(request)

    @Slot(object)
    def process_view(self, request: ViewRequest) -> None:
        """Decode, run and prepare one picture for display, unless the window no longer wants it."""
        from app.ui.state.messages import ViewFailed, ViewSkipped

        path = request.key.path
        decoded, self._decoded = self._decoded, None  # decoded ahead for this first request only
        if not self._latest.is_latest(request.request_id):
            self.skipped.emit(ViewSkipped(request.request_id, path))  # don't spend a second on an unseen image
            return
        if self._model is None:
            self.failed.emit(ViewFailed(request.request_id, path, "no model is loaded"))
            return
        from app.inference.image.pipeline import Stopped
        from app.ui.workers.worker_open import cancelled, latency_since, timing_mark

        mark = timing_mark(self._model)
        try:
            view = self._view(request, decoded)
        except Stopped:  # a tiled image the reader moved away from: its remaining tiles are not run
            self.skipped.emit(ViewSkipped(request.request_id, path))
            return
        except Exception as exc:
            if cancelled(exc):  # a remote request given up for a device switch: no failure of the picture
                self.skipped.emit(ViewSkipped(request.request_id, path))
            else:
                self.failed.emit(ViewFailed(request.request_id, path, failure_line(Path(path), exc),
                                            picture=self._bare_picture()))
            return
        finally:
            self._in_run = None
        if (latency := latency_since(self._model, mark)) is not None:  # before the view: the status bar shows both
            self.remote_timed.emit(latency)
        self.result_ready.emit(view)  # its request_id: the request's (views.view_result)

    def _view(self, request: ViewRequest, decoded: tuple[ViewKey, DecodedImage, float] | None = None) -> ViewResult:
        from app.inference.image import pipeline
        from app.ui.state.messages import TileProgress

        if decoded is not None and request.volume is None and decoded[0] == request.key:
            _, image, decode_ms = decoded
        else:
            image, decode_ms = decode_request(request)
        self._in_run = (request.key, image)
        model, min_confidence = self._tuned(request.tuning.threshold)
        path = request.key.path
        if request.volume is not None:
            self._depths[path] = request.volume.depth
        if model.spec.is_3d:  # from the volume's kept 3D result (its run: fill_volume)
            result = self._volumes3d.slice_result(request, model, min_confidence, decode_ms)
        else:
            result = pipeline.run_image(model, image, decode_ms=decode_ms,
                                        progress=lambda done, total: self.tile_progress.emit(
                                            TileProgress(path, done, total)),
                                        should_stop=lambda: not self._latest.is_latest(request.request_id))
        if min_confidence is not None and not model.spec.is_3d:
            result = pipeline.relabel(result, spec=model.spec, min_confidence=min_confidence)
        view = self._compared(decided(view_result(request, result, image), request.tuning, model.spec),
                              model.spec)
        if self._model_b is not None:
            view = self._disagreement(self._with_model_b(view, image))
        view = settled(view)
        if request.volume is not None and result.labels is not None:
            self._volumes.add(path, request.tuning.threshold, request.key.frame, result)
        return view

    def _bare_picture(self) -> BarePicture | None:
        """The picture being run, without a result (views.bare_picture); None outside process_view's run, or when
        its display copy cannot be made (the failure is said all the same)."""
        if self._in_run is None:
            return None
        try:
            return bare_picture(*self._in_run)
        except Exception as exc:
            log.debug("no display copy of the picture that failed (%s)", type(exc).__name__)
            return None

    def _retrying(self, retrying: RemoteRetrying) -> None:
        """A remote session waits before another try: said with the picture it is trying, if one is shown."""
        self.remote_retrying.emit(replace(retrying, picture=self._bare_picture()))

    def _with_model_b(self, view: ViewResult, image: DecodedImage) -> ViewResult:
        """The second model on the same decoded image: its mask, and its agreement with the first."""
        from app.inference.decide.metrics import image_metrics
        from app.inference.image import pipeline

        model, model_b = self._model, self._model_b
        if model is None or model_b is None:
            return view
        try:
            result_b = pipeline.run_image(model_b, image)
        except Exception as exc:  # B's failure (a NaN output) is B's: A's result stays, the panel says what happened
            return replace(view, error_b=model_b_error_line(model_b.spec.path, exc))
        mask_b, mask = result_b.mask, view.result.mask  # None: not a segmentation result (no labels)
        if mask_b is None or mask is None:
            return view
        agreement = image_metrics(mask_b, mask, model.spec.label_count)
        return replace(view, result_b=result_b, display_mask_b=display_labels(result_b, view)[0],
                       agreement=agreement)

    @Slot(object)
    def retune(self, request: RetuneRequest) -> None:
        """Decide and draw a result again with the reader's new threshold, limit or layer — from its kept scores,
        never a model run. Only the newest retune is done: a slider drag sends many."""
        if not self._latest_tune.is_latest(request.request_id) or self._model is None:
            return
        view, tuning = request.view, request.tuning
        try:
            model, min_confidence = self._tuned(tuning.threshold)
            if tuning.threshold != view.tuning.threshold:
                from app.inference.image import pipeline

                result = pipeline.relabel(view.result, spec=model.spec, min_confidence=min_confidence)
                mask, counts = display_labels(result, view)
                view = replace(view, result=result, display_mask=mask, class_counts=counts)
                mask_b = view.result_b.mask if view.result_b is not None and result.labels is not None else None
                if mask_b is not None and (mask_a := result.mask) is not None:
                    from app.inference.decide.metrics import image_metrics

                    view = replace(view, agreement=image_metrics(mask_b, mask_a, model.spec.label_count))
            view = settled(self._compared(decided(view, tuning, model.spec), model.spec))
        except Exception as exc:
            from app.ui.state.messages import ViewFailed

            self.failed.emit(ViewFailed(request.request_id, view.key.path, failure_line(view.path, exc)))
            return
        self.retuned.emit(replace(view, request_id=request.request_id))

    def _compared(self, view: ViewResult, spec: ModelSpec) -> ViewResult:
        """`view` measured against its reference (a corrected mask in the review folder first, else the reference
        folder's), and in the difference layer the TP/FP/FN codes at the display size (in the disagreement layer,
        model B's codes)."""
        if view.result.labels is None or view.tuning.input_root is None:
            return self._disagreement(view)
        from app.runs.review.log import picture_frame
        frames = max(view.frame_count, self._depths.get(view.key.path, 1))  # a slice's view says 1 (read_slice)
        scored, reference = self._references.compare(view.key.path, view.result.labels, spec,
                                                     ground_truth(view.tuning), frame=picture_frame(view.frame, frames))
        codes = None
        mask = view.result.mask if reference is not None and view.tuning.layer == "difference" else None
        if mask is not None and reference is not None:
            from app.inference.decide.metrics import difference_map

            codes = display_mask(difference_map(mask, reference, view.tuning.class_index), view)
        return self._disagreement(replace(view, scored=scored, display_codes=codes))

    def _disagreement(self, view: ViewResult) -> ViewResult:
        """The "disagreement" layer: where model B differs from A (metrics.disagreement_map codes)."""
        if view.tuning.layer != "disagreement" or view.result_b is None or view.result.labels is None:
            return view
        mask, mask_b = view.result.mask, view.result_b.mask
        if mask is None or mask_b is None:
            return view
        from app.inference.decide.metrics import disagreement_map

        return replace(view, display_codes=display_mask(disagreement_map(mask, mask_b), view))

    def _tuned(self, threshold: float | None) -> tuple[ModelSession, float | None]:
        """(session, min_confidence) for the reader's threshold (worker_batch.tuned); only with a model loaded."""
        if self._model is None:
            raise RuntimeError("no model is loaded")
        return tuned(self._model, threshold)
