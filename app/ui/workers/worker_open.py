"""The inference worker's session opening: a model file on a local device, or a model on a server (a RemoteLoad),
the picture that waited for it decoded ahead, and what the window needs to know of a remote session's requests.
Called from InferenceWorker's slots, on its thread: a remote session blocks that thread on the network (its retries
too), never the GUI thread — except `cancel_requests`, called from the GUI thread to end such a wait."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.inference.model.runtime_options import RuntimeOptions
    from app.inference.model.session import ModelSession
    from app.io.decoded import DecodedImage
    from app.ui.state.messages import LoadRequest, ViewKey
    from app.ui.state.remote_messages import RemoteLatency, RemoteRetrying

log = logging.getLogger(__name__)


def open_model(request: LoadRequest, *, on_retry: Callable[[RemoteRetrying], None]) -> tuple[ModelSession,
                                                                                             RuntimeOptions]:
    """The session `request` asks for (app.inference.remote.opener: a local file or a server's model), not yet
    warmed up, and its runtime options. A remote one's options are the server's to choose (none are sent);
    `on_retry` hears each of its waits before another try."""
    from app.inference.model.runtime_options import RuntimeOptions, parse_runtime_arguments
    from app.inference.remote.opener import open_model_session

    options = parse_runtime_arguments([p for p in request.runtime.split(";") if p.strip()])
    from app.ui.state.remote_messages import RemoteLoad, RemoteRetrying

    if isinstance(request, RemoteLoad) and request.target is not None:
        sidecar = Path(request.sidecar) if request.sidecar else bundled_sidecar(request.target.model)
        return open_model_session(request.target, sidecar=sidecar, warm_up=False,
                                  on_retry=lambda line: on_retry(RemoteRetrying(line))), RuntimeOptions()
    from app.inference.model.builder import load_spec

    spec = load_spec(request.model_path)
    if "device_argmax" not in options.given and "device_argmax" not in spec.runtime.given:
        # the viewer decides again from kept scores (threshold slider, heatmap): an argmax on the GPU
        # would leave none. Asked for by the user or the sidecar, it is kept, and the panel says so.
        options = options.merged(RuntimeOptions.written({"device_argmax": "off"}))
    return open_model_session(spec, device=request.device, runtime=options, warm_up=False), options


def bundled_sidecar(name: str) -> Path | None:
    """The bundled model's sidecar when the server's model has a bundled model's name (as seglens-cli does with
    `--device remote nuclei`), else None: the server's metadata alone."""
    from app.inference.describe.bundled import bundled_models
    from app.inference.model.sidecar import find_sidecar

    return next((find_sidecar(model) for model in bundled_models() if model.stem == name), None)


def decode_ahead(key: ViewKey) -> tuple[ViewKey, DecodedImage, float] | None:
    """The picture that waited for the model, decoded while the window turns `model_ready` into its request
    (~30 ms of GUI work at start-up; the decode releases the GIL). Only a head start: if it fails (None), the
    request decodes again and reports the failure as it always does."""
    from app.inference.image import pipeline

    try:
        image, decode_ms = pipeline.decode(key.path, frame=key.frame)
    except Exception as exc:  # said once, by the request's own decode
        log.debug("decoding ahead failed (%s); the request decodes again", type(exc).__name__)
        return None
    return key, image, decode_ms


def cancel_requests(model: ModelSession | None) -> None:
    """From the GUI thread, before the session is replaced or the window closes: a remote session's request in
    flight and its backoff waits end at once (ModelSession.cancel is for any thread; a remote run then raises a
    'cancelled' RemoteError, which `cancelled` tells apart). A local session's cancel is a no-op."""
    if model is not None:
        model.cancel()


def cancelled(exc: BaseException) -> bool:
    """Whether `exc` is a remote request given up by `cancel_requests` (no failure of the picture: the window
    has moved on to another device or model, or is closing)."""
    from app.errors import SegLensError

    return isinstance(exc, SegLensError) and getattr(exc, "kind", "") == "cancelled"


def release(model: ModelSession | None) -> None:
    """Let the old session go before the new one takes memory (ONNX Runtime's session, a server's connections)."""
    if model is not None:
        model.close()


def model_digest(model: ModelSession) -> str:
    """What the tuning and the review log remember the model by: the file's SHA-256, or for a model on a server
    a digest of where it is (host, name and version: the server's file cannot be read from here)."""
    remote = model.info.remote
    if remote is not None:
        return hashlib.sha256(f"remote {remote.host}/{remote.model}:{remote.version}".encode()).hexdigest()
    from app.ui.workers.worker_batch import content_sha256

    return content_sha256(model.spec.path)


def timing_mark(model: ModelSession | None) -> int:
    """How many requests the session has timed so far (a remote one's; 0 for a local one): latency_since's start."""
    return len(model.timings) if model is not None else 0


def latency_since(model: ModelSession | None, mark: int) -> RemoteLatency | None:
    """The remote requests made since `mark`, summed (a tiled picture sends several); None for a local session."""
    if model is None or len(model.timings) <= mark:
        return None
    from app.ui.state.remote_messages import RemoteLatency

    made = model.timings[mark:]
    computed = [t.compute_ms for t in made if t.compute_ms is not None]
    return RemoteLatency(sum(t.network_ms for t in made), sum(computed) if computed else None, len(made),
                         model.info)


def said(exc: BaseException) -> str:
    """A model's failure to open as the viewer says it (remote_messages.viewer_line: its own advice for a remote
    server's refusal, not the CLI's options)."""
    from app.ui.state.remote_messages import viewer_line

    return viewer_line(exc)
