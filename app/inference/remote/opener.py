"""The one opener of a ModelSession (app.inference.model.session), whichever backend runs it: a ModelSpec on a
device of this machine (app.inference.runtime.session.open_session → LocalSession) or a model on an Open Inference
Protocol server (app.inference.remote.session.open_remote_session → RemoteSession).

It needs both backends, so it sits in the remote room, the lowest that sees both (pyproject.toml's
`inference-rooms`); a face that lets its user choose either (the viewer's Model ▸ Device) opens through it and
holds what it gets as a ModelSession. The remote half is imported only when a server is asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from app.inference.model.runtime_options import RuntimeOptions
from app.inference.model.spec import ModelSpec
from app.inference.runtime.session import DeviceRequest, open_session

if TYPE_CHECKING:
    from app.inference.model.session import ModelSession
    from app.inference.remote.session import RemoteTarget


def open_model_session(model: ModelSpec | RemoteTarget, *, device: str | DeviceRequest = "auto",
                       runtime: RuntimeOptions | None = None, warm_up: bool = True,
                       sidecar: Path | None = None, on_retry: Callable[[str], None] | None = None,
                       in_flight: int | None = None) -> ModelSession:
    """The session of `model`: a spec runs here on `device` with `runtime` over its sidecar's (LocalSession); a
    RemoteTarget runs on its server, its spec from the server's metadata with `sidecar` over it, each wait before
    another try told to `on_retry`, `in_flight` requests of a folder run kept going at once (RemoteSession;
    `device` and `runtime` are the server's to choose). Warmed up (one run on zeros) unless `warm_up` is False."""
    if isinstance(model, ModelSpec):
        return open_session(model, device, runtime=runtime, warm_up=warm_up)
    from app.inference.remote.session import IN_FLIGHT, open_remote_session

    return open_remote_session(model, sidecar=sidecar, runtime=runtime, warm_up=warm_up, on_retry=on_retry,
                               in_flight=IN_FLIGHT if in_flight is None else in_flight)
