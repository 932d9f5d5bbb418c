"""The inference worker's session opening: a model file on a local device, or a model on a server (a RemoteLoad),
and what the window needs to know of a remote session's requests. Called from InferenceWorker's slots, on its
thread: a remote session blocks that thread on the network (its retries too), never the GUI thread."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.inference.session import ModelSession
    from app.ui.state.messages import LoadRequest
    from app.ui.state.remote_messages import RemoteLatency, RemoteRetrying


def open_model(request: LoadRequest, *, on_retry: Callable[[RemoteRetrying], None]) -> tuple[ModelSession,
                                                                                             dict[str, Any]]:
    """The session `request` asks for, not yet warmed up, and its runtime options. A remote one's options are
    the server's to choose (none are sent); `on_retry` hears each of its waits before another try."""
    from app.inference.runtime import parse_runtime_arguments

    options = parse_runtime_arguments([p for p in request.runtime.split(";") if p.strip()])
    from app.ui.state.remote_messages import RemoteLoad, RemoteRetrying

    if isinstance(request, RemoteLoad) and request.target is not None:
        from app.inference.remote import open_remote_session

        sidecar = Path(request.sidecar) if request.sidecar else bundled_sidecar(request.target.model)
        return open_remote_session(request.target, sidecar=sidecar, warm_up=False,
                                   on_retry=lambda line: on_retry(RemoteRetrying(line))), {}
    from app.inference.session import open_session
    from app.inference.spec_builder import load_spec

    spec = load_spec(request.model_path)
    if "device_argmax" not in options and "device_argmax" not in (spec.runtime or {}):
        # the viewer decides again from kept scores (threshold slider, heatmap): an argmax on the GPU
        # would leave none. Asked for by the user or the sidecar, it is kept, and the panel says so.
        options["device_argmax"] = "off"
    return open_session(spec, request.device, runtime=options, warm_up=False), options


def bundled_sidecar(name: str) -> Path | None:
    """The bundled model's sidecar when the server's model has a bundled model's name (as seglens-cli does with
    `--device remote nuclei`), else None: the server's metadata alone."""
    from app.inference.bundled import bundled_models
    from app.inference.sidecar import find_sidecar

    return next((find_sidecar(model) for model in bundled_models() if model.stem == name), None)


def release(model: ModelSession | None) -> None:
    """Let the old session go before the new one takes memory; a remote one's connection is closed."""
    close = getattr(model, "close", None)
    if callable(close):
        close()


def model_digest(model: ModelSession) -> str:
    """What the tuning and the review log remember the model by: the file's SHA-256, or for a model on a server
    a digest of where it is (host, name and version: the server's file cannot be read from here)."""
    remote = model.info.remote
    if remote is not None:
        return hashlib.sha256(f"remote {remote.host}/{remote.model}:{remote.version}".encode()).hexdigest()
    from app.ui.workers.worker_batch import content_sha256

    return content_sha256(model.spec.path)


def timing_mark(model: ModelSession | None) -> int:
    """How many requests the remote session has made so far (0 for a local one): latency_since's start."""
    return len(getattr(model, "timings", ()))


def latency_since(model: ModelSession | None, mark: int) -> RemoteLatency | None:
    """The remote requests made since `mark`, summed (a tiled picture sends several); None for a local session."""
    timings = getattr(model, "timings", None)
    if model is None or timings is None or len(timings) <= mark:
        return None
    from app.ui.state.remote_messages import RemoteLatency

    made = timings[mark:]
    computed = [t.compute_ms for t in made if t.compute_ms is not None]
    return RemoteLatency(sum(t.network_ms for t in made), sum(computed) if computed else None, len(made),
                         model.info)
