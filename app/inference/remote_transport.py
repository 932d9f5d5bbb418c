"""The two wires of a remote session, through tritonclient: gRPC (raw tensor bytes) and HTTP/REST with the binary
tensor extension. Each gives the model's metadata as a plain dict and runs one request; errors are left to
app.inference.remote_errors. tritonclient is imported here, inside the constructors, never at import time (gevent
and grpc cost ~0.2 s and tens of MB: the viewer's first paint and `seglens-cli --version` never pay them).

Gotchas kept (REMOTE.md): tritonclient.http's `infer` adds headers to the dict it is given, so every call gets a
fresh one; gRPC metadata keys must be lower-case; gRPC has no deadline unless `client_timeout` is passed.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np


@dataclass(frozen=True)
class Wire:
    """What a transport needs of a RemoteTarget (app.inference.remote), secrets included."""

    host: str  # "host:port"
    tls: bool
    model: str
    version: str
    timeout_s: float
    ca_file: Path | None = None
    token: str | None = field(default=None, repr=False)
    username: str | None = None
    password: str | None = field(default=None, repr=False)

    def headers(self) -> dict[str, str]:
        """A fresh dict per call (tritonclient.http mutates it); lower-case keys (gRPC refuses others)."""
        if self.token:
            return {"authorization": f"Bearer {self.token}"}
        if self.username is not None:
            pair = f"{self.username}:{self.password or ''}".encode()
            return {"authorization": "Basic " + base64.b64encode(pair).decode("ascii")}
        return {}


@dataclass(frozen=True)
class Answer:
    """One response: the outputs asked for, in that order, and the response's parameters (compute_us, …)."""

    outputs: tuple[np.ndarray | None, ...]
    parameters: dict[str, Any]


class Transport(Protocol):
    protocol: str

    def metadata(self) -> dict[str, Any]: ...

    def infer(self, name: str, tensor: np.ndarray, datatype: str, outputs: list[str]) -> Answer: ...

    def stats(self) -> dict[str, Any]: ...

    def close(self) -> None: ...


class HttpTransport:
    """HTTP/REST, tensors in the binary extension both ways. Not thread-safe (gevent): one per thread."""

    protocol = "http"

    def __init__(self, wire: Wire) -> None:
        import tritonclient.http as th  # type: ignore[import-untyped]

        self._th, self._wire = th, wire
        options = {"ca_certs": str(wire.ca_file)} if wire.tls and wire.ca_file else None
        self._client = th.InferenceServerClient(wire.host, ssl=wire.tls, ssl_options=options,
                                                connection_timeout=wire.timeout_s, network_timeout=wire.timeout_s)

    def metadata(self) -> dict[str, Any]:
        meta: dict[str, Any] = self._client.get_model_metadata(self._wire.model, model_version=self._wire.version,
                                                               headers=self._wire.headers())
        return meta

    def infer(self, name: str, tensor: np.ndarray, datatype: str, outputs: list[str]) -> Answer:
        th, wire = self._th, self._wire
        item = th.InferInput(name, list(tensor.shape), datatype)
        item.set_data_from_numpy(tensor, binary_data=True)
        asked = [th.InferRequestedOutput(out, binary_data=True) for out in outputs]
        result = self._client.infer(wire.model, [item], model_version=wire.version, outputs=asked,
                                    headers=wire.headers())
        response = result.get_response() or {}
        return Answer(tuple(result.as_numpy(out) for out in outputs), dict(response.get("parameters") or {}))

    def stats(self) -> dict[str, Any]:
        """The statistics extension's `v2/models/<m>/stats` (Triton's; raises where the server has none)."""
        found: dict[str, Any] = self._client.get_inference_statistics(self._wire.model, self._wire.version,
                                                                      headers=self._wire.headers())
        return found

    def close(self) -> None:
        self._client.close()


class GrpcTransport:
    """gRPC, tensors as raw bytes. The client is thread-safe (several requests may be in flight)."""

    protocol = "grpc"

    def __init__(self, wire: Wire) -> None:
        import tritonclient.grpc as tg  # type: ignore[import-untyped]

        self._tg, self._wire = tg, wire
        ca = str(wire.ca_file) if wire.tls and wire.ca_file else None
        self._client = tg.InferenceServerClient(wire.host, ssl=wire.tls, root_certificates=ca)

    def metadata(self) -> dict[str, Any]:
        meta: dict[str, Any] = self._client.get_model_metadata(
            self._wire.model, model_version=self._wire.version, headers=self._wire.headers(), as_json=True,
            client_timeout=self._wire.timeout_s)
        return meta  # as JSON, shapes are strings ('-1'): remote_graph reads both

    def infer(self, name: str, tensor: np.ndarray, datatype: str, outputs: list[str]) -> Answer:
        tg, wire = self._tg, self._wire
        item = tg.InferInput(name, list(tensor.shape), datatype)
        item.set_data_from_numpy(tensor)
        asked = [tg.InferRequestedOutput(out) for out in outputs]
        result = self._client.infer(wire.model, [item], model_version=wire.version, outputs=asked,
                                    headers=wire.headers(), client_timeout=wire.timeout_s)
        return _answer(result, outputs)

    def start_infer(self, name: str, tensor: np.ndarray, datatype: str, outputs: list[str],
                    done: Callable[[Answer | None, BaseException | None], None]) -> Callable[[], None]:
        """The request sent without waiting: `done(answer, None)` or `done(None, error)` comes on gRPC's thread;
        what is returned cancels the call (the server sees it cancelled)."""
        tg, wire = self._tg, self._wire
        item = tg.InferInput(name, list(tensor.shape), datatype)
        item.set_data_from_numpy(tensor)
        asked = [tg.InferRequestedOutput(out) for out in outputs]

        def finished(result: Any, error: BaseException | None) -> None:
            if error is not None:  # a copy: tritonclient's is held in a cycle with its callback's frame and the
                # call, and the frames it is raised through would keep the session (its channel) until a gc
                return done(None, _copied(error))
            try:
                answer = _answer(result, outputs)
            except Exception as exc:  # a malformed answer: the caller's to say
                return done(None, exc)
            return done(answer, None)

        call = self._client.async_infer(wire.model, [item], finished, model_version=wire.version, outputs=asked,
                                        headers=wire.headers(), client_timeout=wire.timeout_s)
        cancel: Callable[[], None] = call.cancel
        return cancel

    def stats(self) -> dict[str, Any]:
        """ModelStatistics as JSON (its int64 counts are strings there: read with int())."""
        found: dict[str, Any] = self._client.get_inference_statistics(
            self._wire.model, self._wire.version, headers=self._wire.headers(), as_json=True,
            client_timeout=self._wire.timeout_s)
        return found

    def close(self) -> None:
        self._client.close()


def _copied(error: BaseException) -> BaseException:
    """An InferenceServerException anew (its message, status, details), without the traceback it came with."""
    try:
        return type(error)(error.message(), status=error.status(), debug_details=error.debug_details())  # type: ignore[attr-defined,call-arg]
    except Exception:  # not tritonclient's (a test's, or one of another shape): as it is
        return error


def _answer(result: Any, outputs: list[str]) -> Answer:
    parameters = {key: _parameter(value) for key, value in result.get_response().parameters.items()}
    return Answer(tuple(result.as_numpy(out) for out in outputs), parameters)


def _parameter(value: Any) -> Any:
    """An InferParameter's value (bool / int64 / string / double / uint64, whichever it holds)."""
    choice = value.WhichOneof("parameter_choice")
    return getattr(value, choice) if choice else None


def compute_totals(stats: dict[str, Any]) -> tuple[int, int] | None:
    """(inferences, their compute ns: input + infer + output) summed over the statistics' model versions, or None
    when the answer holds none (cumulative since the server started, and of all its clients)."""
    count = total = 0
    for model in stats.get("model_stats") or ():
        parts = model.get("inference_stats") or {}
        count += int((parts.get("compute_infer") or {}).get("count") or 0)
        total += sum(int((parts.get(key) or {}).get("ns") or 0)
                     for key in ("compute_input", "compute_infer", "compute_output"))
    return (count, total) if count else None


def open_transport(wire: Wire, protocol: str) -> Transport:
    """The transport for `protocol` ("grpc" or "http")."""
    return GrpcTransport(wire) if protocol == "grpc" else HttpTransport(wire)
