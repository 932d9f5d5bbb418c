"""PromptWorker: the Smart tool's prompt model on its own long-lived QThread "prompt" (a Run on all on the inference
thread must not hold up a click).

One PromptSession, created in `load` on this thread and kept warm: never reloaded per image; its embeddings cache
(LRU by bytes) means going back to an image costs no encoder run. A click is a DecodeRequest (newest wins through the
LatestRequest the Smart controller shares: a request queued behind a newer one is skipped); the encoder runs only
when the picture's PromptKey is not cached. Prefetch encodes the next pictures at low priority, one per slot, each
re-posted behind whatever the window asked meanwhile; a foreground request cancels the encoder run of a prefetch in
flight through ONNX Runtime's RunOptions.terminate (`cancel_prefetch`, called from the GUI thread), and a newer
prefetch request replaces an older one. Failures come back as one line, never a traceback, and never end the thread.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, QTimer, Signal, Slot

from app.ui.state.view_state import LatestRequest

if TYPE_CHECKING:
    from app.inference.prompt.request import PromptModel
    from app.ui.state.prompt_messages import (
        DecodeRequest,
        PrefetchImage,
        PrefetchRequest,
        PromptImage,
        PromptKey,
        PromptLoad,
        PropagateRequest,
    )

log = logging.getLogger(__name__)
NO_MODEL = "no prompt model: boxes through grabCut; points need a model"
MAX_SIDE = 8192  # views.MAX_DISPLAY_SIDE: a larger picture is shown downscaled, and cannot be edited


class PromptWorker(QObject):
    # each signal carries one typed frozen record of app.ui.state.prompt_messages
    ready = Signal(object)  # PromptReady
    failed = Signal(object)  # PromptFailed: the model asked for did not load (grabCut holds the fort)
    proposal = Signal(object)  # ProposalReady
    proposal_failed = Signal(object)  # ProposalFailed
    prefetched = Signal(object)  # Prefetched
    propagated = Signal(object)  # SlicePropagated
    propagation_ended = Signal(object)  # PropagationDone

    def __init__(self, *, latest: LatestRequest, latest_prefetch: LatestRequest) -> None:
        """`latest`, `latest_prefetch`: the Smart controller's newest decode and prefetch ids, shared."""
        super().__init__()
        self._latest, self._latest_prefetch = latest, latest_prefetch
        self._model: PromptModel | None = None
        self._lock = threading.Lock()
        self._prefetching: tuple[Any, PromptKey] | None = None  # (RunOptions, key) of the encoder run in flight
        self._decoded: dict[tuple[Any, ...], PromptKey] = {}  # prefetch item -> its key, not decoded twice
        self._stopped = 0  # propagations up to this request id are to stop (set from the GUI thread)

    # -- read or called from the GUI thread ------------------------------------------------------------

    @property
    def model(self) -> PromptModel | None:
        """The prompt model held (tests read its encoder_runs)."""
        return self._model

    def cancel_prefetch(self, keep: PromptKey | None = None) -> None:
        """A foreground request: end the prefetch's encoder run in flight, unless it encodes `keep` (the picture
        the request is for: its embedding is what the request waits for)."""
        with self._lock:
            if self._prefetching is not None and self._prefetching[1] != keep:
                self._prefetching[0].terminate = True

    def stop_propagation(self, request_id: int | None = None) -> None:
        """Stop propagation `request_id` (None: any) after its slice in progress; safe before it has begun."""
        with self._lock:
            self._stopped = max(self._stopped, request_id if request_id is not None else 1 << 62)

    # -- slots -----------------------------------------------------------------------------------------

    @Slot(object)
    def load(self, request: PromptLoad) -> None:
        """Open (and warm up) the prompt model; grabCut, said in one line, when it cannot be opened."""
        from app.errors import one_line
        from app.inference.prompt.grabcut import GrabCutSession
        from app.inference.prompt.model import load_prompt_model
        from app.ui.state.prompt_messages import PromptFailed, PromptReady

        self._decoded.clear()
        if request.model.strip().lower() == "grabcut":
            self._model = GrabCutSession()
            self.ready.emit(PromptReady(request.request_id, request.model, "grabCut", False, NO_MODEL))
            return
        try:
            model = load_prompt_model(request.model, request.device)
            model.warm_up()  # the runtime's first run allocates: not counted as an image's
        except Exception as exc:  # a missing or mismatched pair: one line, and the model-free fallback
            message = f"prompt model not loaded: {one_line(exc, most=300, first=True)}"
            self._model = GrabCutSession()
            self.failed.emit(PromptFailed(request.request_id, message))
            self.ready.emit(PromptReady(request.request_id, request.model, "grabCut", False, NO_MODEL))
            return
        self._model = model
        about = model.about()  # a GPU asked for and not obtained: why, in the panel
        self.ready.emit(PromptReady(request.request_id, request.model, about.name, True, about.note, about.where))

    @Slot(object)
    def decode(self, request: DecodeRequest) -> None:
        """One prompt: the embedding (cached, or one encoder run) and the decoder; skipped when not the newest."""
        from app.ui.state.prompt_messages import ProposalFailed, ProposalReady

        if not self._latest.is_latest(request.request_id):
            return
        model, key = self._model, request.image.key
        if model is None:
            self.proposal_failed.emit(ProposalFailed(request.request_id, key, "the prompt model is still loading"))
            return
        try:
            started = time.perf_counter()
            pixels = request.image.pixels if _cached(model, key) else request.image.encoder_pixels()
            embedding = model.embed(pixels, key=key)
            encoded = time.perf_counter()
            proposal = model.decode(embedding, request.points, request.box)
        except Exception as exc:
            self.proposal_failed.emit(ProposalFailed(request.request_id, key, _failure(exc)))
            return
        done = time.perf_counter()
        self.proposal.emit(ProposalReady(request.request_id, key, proposal.mask, proposal.iou, proposal.low_res,
                                         (encoded - started) * 1000, (done - encoded) * 1000, request.pressed))

    @Slot(object)
    def prefetch(self, request: PrefetchRequest) -> None:
        """Encode the request's first picture not cached yet, then post the rest behind whatever came meanwhile."""
        if not self._latest_prefetch.is_latest(request.request_id):
            return
        if request.first is not None:
            if self._model is not None and not self._model.model_free:
                self._encode_ahead(request.request_id, self._model, request.first)
            rest = replace(request, first=None)
        elif request.images:
            self._prefetch_one(request.request_id, request.images[0])
            rest = replace(request, images=request.images[1:])
        else:
            return
        if rest.images:
            QTimer.singleShot(0, lambda: self.prefetch(rest))

    @Slot(object)
    def propagate(self, request: PropagateRequest) -> None:
        """Carry an accepted mask through the volume's slices (app.runs.prompts.propagate), one signal per slice
        and one at the end; stop_propagation(its id) ends it after the slice in progress."""
        from app.runs.prompts.propagate import PropagatedSlice, PropagationEnd
        from app.ui.state.prompt_messages import PropagationDone, SlicePropagated
        from app.ui.workers.prompt_propagation import propagation

        if self._model is None:
            end = PropagationEnd(request.start, "the prompt model is still loading")
            self.propagation_ended.emit(PropagationDone(request.request_id, request.path, end))
            return
        last = request.start
        try:
            for item in propagation(self._model, request, stop=lambda: self._stopped >= request.request_id):
                if isinstance(item, PropagatedSlice):
                    last = item.index
                    self.propagated.emit(SlicePropagated(request.request_id, request.path, item))
                else:
                    self.propagation_ended.emit(PropagationDone(request.request_id, request.path, item))
        except Exception as exc:  # never without its end: the window would say "propagating …" for ever
            end = PropagationEnd(last, _failure(exc))
            self.propagation_ended.emit(PropagationDone(request.request_id, request.path, end))

    # -- inside ----------------------------------------------------------------------------------------

    def _prefetch_one(self, request_id: int, item: PrefetchImage) -> None:
        from app.ui.state.prompt_messages import Prefetched

        model = self._model
        if model is None or model.model_free:  # grabCut encodes nothing
            return
        known = self._decoded.get(_item_id(item))
        if known is not None and model.cached(known):
            self.prefetched.emit(Prefetched(request_id, known, 0.0))
            return
        try:
            image = prefetch_image(item)
        except Exception as exc:  # an unreadable next file: the reader will be told when they open it
            self._given_up(request_id, None, _failure(exc))
            return
        if image is None:
            return
        self._decoded[_item_id(item)] = image.key
        self._encode_ahead(request_id, model, image)

    def _given_up(self, request_id: int, key: PromptKey | None, line: str) -> None:
        """A picture not encoded ahead: why, at DEBUG (the reader is told when they open it); cancelled: quietly."""
        from app.ui.state.prompt_messages import Prefetched

        if line != "cancelled":
            log.debug("prefetch: %s", line)
        self.prefetched.emit(Prefetched(request_id, key, 0.0, line))

    def _encode_ahead(self, request_id: int, model: PromptModel, image: PromptImage) -> None:
        import onnxruntime as ort

        from app.ui.state.prompt_messages import Prefetched

        if model.cached(image.key):
            self.prefetched.emit(Prefetched(request_id, image.key, 0.0))
            return
        options = ort.RunOptions()
        with self._lock:
            self._prefetching = (options, image.key)
        try:
            if not self._latest_prefetch.is_latest(request_id):
                return  # replaced while this picture was decoded
            started = time.perf_counter()
            model.embed(image.encoder_pixels(), key=image.key, run_options=options)
        except Exception as exc:
            self._given_up(request_id, image.key, "cancelled" if options.terminate else _failure(exc))
            return
        finally:
            with self._lock:
                self._prefetching = None
        self.prefetched.emit(Prefetched(request_id, image.key, (time.perf_counter() - started) * 1000))


def prefetch_image(item: PrefetchImage) -> PromptImage | None:
    """A picture to encode ahead, decoded as the inference worker decodes it (worker_volumes.decode_request,
    views.view_result), with the key the editor will send for it once it is shown; None when it will be shown
    downscaled (not editable)."""
    from app.ui.state.prompt_messages import PromptImage, PromptKey

    if item.volume is None:
        from app.inference.image import pipeline

        decoded, _ = pipeline.decode(item.path, frame=item.frame)
    else:
        from app.io.images import read_slice

        decoded = read_slice(item.volume, item.frame)
    if max(decoded.pixels.shape[:2]) > MAX_SIDE:
        return None
    window = (decoded.window if item.own_window else item.window) if decoded.raw is not None else None
    return PromptImage(PromptKey(item.path, item.frame, window), decoded.display(), decoded.raw, decoded.invert)


def _cached(model: PromptModel, key: PromptKey) -> bool:
    return model.cached(key)


def _item_id(item: PrefetchImage) -> tuple[Any, ...]:
    return item.path, item.frame, item.window, item.own_window


def _failure(exc: BaseException) -> str:
    """One line for the status bar: a refused prompt's own message; anything else logged with its type."""
    from app.errors import SegLensError, one_line

    if not isinstance(exc, SegLensError):
        from app.logs import log_exception

        log_exception(log, logging.WARNING, "the prompt model failed", exc)
    return one_line(exc, most=300, first=True, typed=not isinstance(exc, SegLensError))
