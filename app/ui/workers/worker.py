"""InferenceWorker: one QObject living in one long-lived QThread that owns the ONNX Runtime session.

The session is created, warmed up and run only on that thread (inside slots). Requests come in through queued
signals as `messages.ViewRequest`s with ids; a request older than the newest one is dropped unprocessed (the newest
id is the window's, a `LatestRequest` its ViewState shares with this worker), so stepping quickly through a folder
never builds a backlog. Failures come back as signals with a one-line message — never swallowed, and
they never end the thread.
"""

from __future__ import annotations

import copy
import logging
import threading
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal, Slot

from app.ui.state.view_state import LatestRequest
from app.ui.workers.views import decided, display_labels, display_mask, settled, view_result
from app.ui.workers.worker_batch import BatchSlots, failure_line
from app.ui.workers.worker_volumes import VolumeFillSlots, decode_request

if TYPE_CHECKING:  # messages loads in the slots, after the window shows (its dataclasses cost ~4 ms)
    from app.inference.session import SessionInfo
    from app.ui.state.messages import ListedInput, RetuneRequest, ViewRequest, ViewResult

log = logging.getLogger(__name__)



class InferenceWorker(VolumeFillSlots, BatchSlots, QObject):
    """The sessions and every slot that runs them; Run on all and the review report (worker_batch.py) and the
    whole-volume count (worker_volumes.py) are mixins, run on this same thread."""

    model_ready = Signal(int, object)  # generation, ModelSummary
    model_failed = Signal(int, str)  # generation, message
    result_ready = Signal(int, object)  # request id, ViewResult
    retuned = Signal(int, object)  # retune id, ViewResult decided and drawn again from its kept scores
    failed = Signal(int, object, str)  # request id, path (str: never a QString, see file_list._path), message
    skipped = Signal(int, object)  # request id, path: dropped unprocessed, the window had moved on
    tile_progress = Signal(object, int, int)  # path, tiles done, tiles in all (a tiled image, input.resize: tile)
    batch_progress = Signal(object, object, object)  # batch.Outcome, batch.RunSummary (a copy), tuning.Judgement
    batch_finished = Signal(object, str)  # batch.RunSummary, report path or error message
    report_finished = Signal(bool, str)  # written?, the report's path or the error
    model_b_ready = Signal(object)  # ModelSummary of the second model (None: comparing ended)
    model_b_failed = Signal(str)
    agreement_ready = Signal(object, float, int, int)  # path, B's mean IoU against A, done, total (compare_all)
    compare_finished = Signal(bool, str)  # completed?, a one-line summary or why it stopped
    volume_counted = Signal(object, int, int, object, object)  # path, slices counted, slices in all, voxels per
    # label value (numpy), mL per label value (None without spacing): the whole-volume legend (fill_volume)
    volume_count_failed = Signal(object, str)  # path, `slice 3 of 40 failed: why` (VolumeFill.failure_line)

    def __init__(self, *, latest: LatestRequest | None = None, latest_tune: LatestRequest | None = None) -> None:
        """`latest`, `latest_tune`: the window's holders of the newest view and retune ids (ViewState), shared so
        that a request the window no longer wants is skipped here; a driver without a window passes its own."""
        super().__init__()
        self._model = None
        self._batch_model = None  # CPU: the session "Run on all" uses, one intra-op thread short (see _for_batch)
        self._batch_threads: int | None = None
        self._options = None
        self._latest = latest if latest is not None else LatestRequest()
        self._latest_tune = latest_tune if latest_tune is not None else LatestRequest()
        self._image_waiting = False
        self._waiting_key = None  # messages.ViewKey of the file picture waiting for the model, decoded once it's built
        self._decoded = None  # (ViewKey, DecodedImage, decode ms) of that picture, taken by the next process_view
        self._cancel = threading.Event()
        self.session_threads: list[int] = []  # ident of the thread each session was created on (tests, logs)
        self._references: dict = {}  # reference folder -> its ReferenceIndex (walked once)
        self._model_b = None  # the second model of Model ▸ Compare with another model
        self._fill = None  # app.runs.volume_fill.VolumeFill of the volume shown, counted between requests
        self._fill_key: tuple | None = None  # (path, threshold) it counts for

    # -- read on the GUI thread (tests, dialogs): plain attribute reads, safe under the GIL --------------

    @property
    def session_info(self) -> SessionInfo | None:
        """SessionInfo of the interactive session, None until one is loaded."""
        return self._model.info if self._model is not None else None

    @property
    def batch_session_threads(self) -> int | None:
        """Intra-op threads of the separate session Run on all uses on the CPU; None while it uses the
        interactive one (on a GPU, threads chosen by the user, a single core, or before the first run)."""
        return self._batch_threads if self._batch_model is not None else None

    # -- called from the GUI thread --------------------------------------------------------------------

    def note_image_waiting(self, key=None) -> None:
        """An image is waiting for the model being loaded: its own run will warm the session up (one run sooner
        to the first overlay than a run on zeros followed by the image's). `key`: that picture, when it is a
        file's (messages.ViewKey; None for a volume's slice) — decoded here as soon as the session is built,
        while the window answers `model_ready` with its request, instead of after it."""
        self._image_waiting = True
        self._waiting_key = key

    def cancel_batch(self) -> None:
        self._cancel.set()

    # -- slots: run on the worker thread ---------------------------------------------------------------

    @Slot(int, object, str, str)
    def load_model(self, generation: int, model_path: str, device: str, runtime: str) -> None:
        """Build the session here, on the worker thread. `runtime`: "KEY=VALUE;KEY=VALUE" (as --runtime)."""
        from app.errors import SegLensError

        # OpenCV and Pillow too: an extension module's import holds the GIL (and so stalls the GUI) throughout;
        # better while "loading model…" shows than when the user opens a folder
        from app.inference import pipeline  # noqa: F401
        from app.inference.runtime import parse_runtime_arguments
        from app.inference.session import open_session
        from app.inference.spec_builder import load_spec
        from app.ui.state.messages import ModelSummary

        self._model = self._batch_model = None  # the old sessions are released before the new one takes memory
        self._fill = self._fill_key = None
        if self._model_b is not None:  # a comparison was with the old model
            self._model_b = None
            self.model_b_ready.emit(None)
        try:
            options = parse_runtime_arguments([p for p in runtime.split(";") if p.strip()])
            spec = load_spec(model_path)
            if "device_argmax" not in options and "device_argmax" not in (spec.runtime or {}):
                # the viewer decides again from kept scores (threshold slider, heatmap): an argmax on the GPU
                # would leave none. Asked for by the user or the sidecar, it is kept, and the panel says so.
                options["device_argmax"] = "off"
            model = open_session(spec, device, runtime=options, warm_up=False)
            waiting, self._image_waiting = self._image_waiting, False
            waiting_key, self._waiting_key, self._decoded = self._waiting_key, None, None
            if not waiting:
                model.warm_up()
        except (SegLensError, ValueError) as exc:
            self.model_failed.emit(generation, str(exc))
            return
        except Exception as exc:
            from app.errors import unexpected_error_line
            from app.logs import log_exception

            log_exception(log, logging.ERROR, f"loading the model {Path(model_path).name} failed", exc)
            self.model_failed.emit(generation, unexpected_error_line(Path(model_path), exc))
            return
        self._model, self._options = model, options
        self.session_threads.append(threading.get_ident())
        log.info("model %s on %s (requested %s)%s", spec.path.name, model.info.provider, model.info.requested,
                 f": {model.info.fallback_reason}" if model.info.fallback_reason else "")
        # as the session runs it; hashed here, not on the GUI thread (a model is hundreds of MB)
        self.model_ready.emit(generation, ModelSummary(model.spec, model.info, _content_sha256(spec.path)))
        if waiting_key is not None:
            self._decode_ahead(waiting_key)

    def _decode_ahead(self, key) -> None:
        """Decode the picture that waited for the model while the window turns `model_ready` into its request
        (~30 ms of GUI work at start-up; the decode releases the GIL). Only a head start: if it fails, the
        request decodes again and reports the failure as it always does."""
        from app.inference import pipeline

        try:
            image, decode_ms = pipeline.decode(key.path, frame=key.frame)
        except Exception as exc:  # said once, by the request's own decode
            log.debug("decoding ahead failed (%s); the request decodes again", type(exc).__name__)
            return
        self._decoded = (key, image, decode_ms)

    @Slot(object, str, str)
    def load_model_b(self, model_path: str, device: str, runtime: str) -> None:
        """Open (and warm) a second session on this thread, for comparing with the first; "" ends comparing.
        Both sessions stay loaded: on a GPU both on the device when its memory allows (else the second one's
        SessionInfo says where it runs and why)."""
        from app.errors import SegLensError
        from app.inference.runtime import parse_runtime_arguments
        from app.inference.session import open_session
        from app.inference.spec_builder import load_spec
        from app.runs.compare import compare_problem
        from app.ui.state.messages import ModelSummary

        self._model_b = None
        if not model_path:
            self.model_b_ready.emit(None)
            return
        try:
            spec = load_spec(model_path)
            refused = compare_problem(self._model.spec, spec) if self._model is not None else "no model is loaded"
            if refused:
                self.model_b_failed.emit(refused)
                return
            options = parse_runtime_arguments([p for p in runtime.split(";") if p.strip()])
            options.setdefault("device_argmax", "off")  # as for model A: its mask is compared, its scores kept
            self._model_b = open_session(spec, device, runtime=options)
        except (SegLensError, ValueError) as exc:
            self.model_b_failed.emit(str(exc))
            return
        except Exception as exc:
            from app.errors import unexpected_error_line
            from app.logs import log_exception

            log_exception(log, logging.ERROR, f"loading model B {Path(model_path).name} failed", exc)
            self.model_b_failed.emit(unexpected_error_line(Path(model_path), exc))
            return
        self.session_threads.append(threading.get_ident())
        self.model_b_ready.emit(ModelSummary(spec, self._model_b.info))

    @Slot(list)
    def compare_all(self, entries: list[ListedInput]) -> None:
        """Both models on every listed input, for the list's agreement column and sort (a volume measured over
        every voxel, as `seglens-cli compare`: app.runs.compare); Cancel stops it between images and slices. An
        input that cannot be read is skipped and counted."""
        from app.inference.pipeline import Stopped
        from app.io.discover import InputFile
        from app.runs.compare import image_agreement, volume_agreement

        self._cancel.clear()
        if self._model is None or self._model_b is None:
            self.compare_finished.emit(False, "load model B first (Model ▸ Compare with another model…)")
            return
        failed, unreadable, first = 0, 0, ""
        for done, entry in enumerate(entries, 1):
            if self._cancel.is_set():
                self.compare_finished.emit(False, f"cancelled after {done - 1} of {len(entries)} images")
                return
            try:
                agreement = volume_agreement(self._model, self._model_b, entry.volume,
                                             should_stop=self._cancel.is_set) if entry.volume is not None else \
                    image_agreement(self._model, self._model_b, InputFile(Path(entry.path), Path(entry.rel)))
            except Stopped:  # Cancel inside a volume
                self.compare_finished.emit(False, f"cancelled after {done - 1} of {len(entries)} images")
                return
            except Exception as exc:
                from app.errors import ImageError
                from app.logs import private

                line = failure_line(Path(entry.path), exc)
                private(log, logging.WARNING, entry.path, f"compare: {line}")
                if isinstance(exc, ImageError):  # the input itself: not something either model did
                    unreadable += 1
                else:  # a model failed on it (B's NaN output): said with its line, not as "could not be read"
                    failed, first = failed + 1, first or line
                continue
            self.agreement_ready.emit(entry.path, agreement.metrics.iou, done, len(entries))
        self.compare_finished.emit(True, compare_summary(len(entries), unreadable, failed, first))

    @Slot(object)
    def process_view(self, request: ViewRequest) -> None:
        """Decode, run and prepare one picture for display, unless the window no longer wants it."""
        path = request.key.path
        decoded, self._decoded = self._decoded, None  # decoded ahead for this first request only
        if not self._latest.is_latest(request.request_id):
            self.skipped.emit(request.request_id, path)  # don't spend a second on an image nobody looks at
            return
        if self._model is None:
            self.failed.emit(request.request_id, path, "no model is loaded")
            return
        from app.inference.pipeline import Stopped

        try:
            view = self._view(request, decoded)
        except Stopped:  # a tiled image the reader moved away from: its remaining tiles are not run
            self.skipped.emit(request.request_id, path)
            return
        except Exception as exc:
            self.failed.emit(request.request_id, path, failure_line(Path(path), exc))
            return
        self.result_ready.emit(request.request_id, view)

    def _view(self, request: ViewRequest, decoded: tuple | None = None) -> ViewResult:
        from app.inference import pipeline

        if decoded is not None and request.volume is None and decoded[0] == request.key:
            _, image, decode_ms = decoded
        else:
            image, decode_ms = decode_request(request)
        model, min_confidence = self._tuned(request.tuning.threshold)
        path = request.key.path
        result = pipeline.run_image(model, image, decode_ms=decode_ms,
                                    progress=lambda done, total: self.tile_progress.emit(path, done, total),
                                    should_stop=lambda: not self._latest.is_latest(request.request_id))
        if min_confidence is not None:
            result = pipeline.relabel(result, spec=model.spec, min_confidence=min_confidence)
        view = self._compared(decided(view_result(request, result, image), request.tuning, model.spec),
                              model.spec)
        if self._model_b is not None:
            view = self._disagreement(self._with_model_b(view, image))
        view = settled(view)
        if request.volume is not None and result.labels is not None and \
                self._fill_key == (path, request.tuning.threshold):
            self._fill.add(request.key.frame, result.mask)  # the fill need not run this slice again
        return view

    def _with_model_b(self, view: ViewResult, image) -> ViewResult:
        """The second model on the same decoded image: its mask, and its agreement with the first."""
        from app.inference import pipeline
        from app.inference.metrics import image_metrics

        try:
            result_b = pipeline.run_image(self._model_b, image)
        except Exception as exc:  # B's failure (a NaN output) is B's: A's result stays, the panel says what happened
            return replace(view, error_b=model_b_error_line(self._model_b.spec.path, exc))
        if result_b.labels is None or view.result.labels is None:
            return view
        agreement = image_metrics(result_b.mask, view.result.mask, self._model.spec.label_count)
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
                from app.inference import pipeline

                result = pipeline.relabel(view.result, spec=model.spec, min_confidence=min_confidence)
                mask, counts = display_labels(result, view)
                view = replace(view, result=result, display_mask=mask, class_counts=counts)
                if view.result_b is not None and result.labels is not None:
                    from app.inference.metrics import image_metrics

                    view = replace(view, agreement=image_metrics(view.result_b.mask, result.mask,
                                                                 model.spec.label_count))
            view = settled(self._compared(decided(view, tuning, model.spec), model.spec))
        except Exception as exc:
            self.failed.emit(request.request_id, view.key.path, failure_line(view.path, exc))
            return
        self.retuned.emit(request.request_id, view)

    def _compared(self, view: ViewResult, spec) -> ViewResult:
        """`view` measured against its reference (a corrected mask in the review folder first, else the reference
        folder's), and in the difference layer the TP/FP/FN codes at the display size (in the disagreement layer,
        model B's codes)."""
        from app.ui.workers.ground_truth import compare

        if view.result.labels is None or view.tuning.input_root is None:
            return self._disagreement(view)
        scored, reference = compare(view.key.path, view.result.labels, view.tuning, spec, self._references)
        codes = None
        if reference is not None and view.tuning.layer == "difference":
            from app.inference.metrics import difference_map

            codes = display_mask(difference_map(view.result.mask, reference, view.tuning.class_index), view)
        return self._disagreement(replace(view, scored=scored, display_codes=codes))

    def _disagreement(self, view: ViewResult) -> ViewResult:
        """The "disagreement" layer: where model B differs from A (metrics.disagreement_map codes)."""
        if view.tuning.layer != "disagreement" or view.result_b is None or view.result.labels is None:
            return view
        from app.inference.metrics import disagreement_map

        return replace(view, display_codes=display_mask(disagreement_map(view.result.mask, view.result_b.mask),
                                                         view))

    def _tuned(self, threshold: float | None):
        """(session, min_confidence) for the reader's threshold: a binary or anomaly model's copy with that pixel
        threshold in its spec (it shares the ONNX Runtime session), or the session and a multi-class model's
        minimum confidence (app.inference.tuning.with_threshold)."""
        from app.inference.tuning import with_threshold

        spec, min_confidence = with_threshold(self._model.spec, threshold)
        if spec is self._model.spec:
            return self._model, min_confidence
        model = copy.copy(self._model)
        model.spec = spec
        return model, min_confidence


def _content_sha256(path: Path) -> str:
    """The model file's SHA-256, or "" when it cannot be read again (then nothing is remembered for it)."""
    from app.io.files import file_sha256

    try:
        return file_sha256(Path(path))
    except OSError:
        return ""


def model_b_error_line(model_path: Path, exc: Exception) -> str:
    """Model B's failure on a picture as B's one line (`b.onnx: non-finite model output …`): a model's own errors
    name the model, not the image; an unexpected one goes to the log in full."""
    from app.errors import SegLensError, unexpected_error_line

    if isinstance(exc, SegLensError):
        return str(exc)  # already one line
    from app.logs import log_exception

    log_exception(log, logging.ERROR, f"model B {model_path.name} failed", exc)
    return unexpected_error_line(model_path.name, exc)


def compare_summary(total: int, unreadable: int, failed: int, first: str) -> str:
    """`3 images compared, 1 could not be read, 1 failed: <the first failure's line>` (Compare all's last word)."""
    text = f"{total - unreadable - failed} images compared"
    if unreadable:
        text += f", {unreadable} could not be read"
    if failed:
        text += f", {failed} failed: {first}" if failed == 1 else f", {failed} failed (the first: {first})"
    return text
