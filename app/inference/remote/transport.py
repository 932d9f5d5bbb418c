"""The two wires of a remote session, through tritonclient: gRPC (raw tensor bytes) and HTTP/REST with the binary
tensor extension. Each gives the model's metadata as a plain dict and runs one request; errors are left to
app.inference.remote.errors. tritonclient is imported here, inside the constructors, never at import time (gevent
and grpc cost ~0.2 s and tens of MB: the viewer's first paint and `seglens-cli --version` never pay them).

Gotchas kept (the wires as a user sees them: docs/remote.md): tritonclient.http's `infer` adds headers to the
dict it is given, so every call gets a fresh one; gRPC metadata keys must be lower-case; gRPC has no deadline
unless `client_timeout` is passed.

Bounded as app.guard.net bounds every request: a **deadline per request**, not per read — gRPC's
`client_timeout` is one; over HTTP tritonclient's `network_timeout` is per read (a server trickling a byte a
second outlives it), so each call runs under a `gevent.Timeout` of the whole timeout, which interrupts the read
it is blocked in and raises the gate's DeadlineExceeded. An **answer-size cap** (`Wire.max_answer_bytes`): over
gRPC the channel's receive limit (the message's declared length is refused before its body arrives); over HTTP a
declared Content-Length over it is refused before a byte of the body is read and the body is counted as it
arrives (app.guard.net.check_declared / AnswerTooLarge); an answer compressed although no compression was asked
for is refused (tritonclient would inflate it whole).
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from app.guard.answers import MAX_ANSWER_BYTES
from app.guard.net import CHUNK, AnswerTooLarge, Deadline, DeadlineExceeded, NetRefused, check_declared

GRPC_MESSAGE_LIMIT = (1 << 31) - 1  # gRPC's own ceiling on a message (tritonclient's default limit)
MAX_METADATA_BYTES = 4 << 20  # a model's metadata or statistics: a few kB of JSON (64 tensors at most)


@dataclass(frozen=True)
class Wire:
    """What a transport needs of a RemoteTarget (app.inference.remote.session), secrets included."""

    host: str  # "host:port"
    tls: bool
    model: str
    version: str
    timeout_s: float
    ca_file: Path | None = None
    token: str | None = field(default=None, repr=False)
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    max_answer_bytes: int = MAX_ANSWER_BYTES  # one answer, all its outputs (the gate's cap on a model's answer)
    allow_insecure: bool = False  # credentials may travel in clear text to another host (the user's setting)

    def deadline(self, what: str = "the request") -> Deadline:
        """The deadline of one request: the whole timeout, for the connection, the upload and the whole answer."""
        return Deadline(self.timeout_s, what)

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
    """HTTP/REST, tensors in the binary extension both ways. Not thread-safe (gevent): one per thread. Every call
    runs within a deadline of the whole timeout and its answer within the size cap (the module's docstring)."""

    protocol = "http"

    def __init__(self, wire: Wire) -> None:
        import gevent  # type: ignore[import-untyped]  # tritonclient.http's own event loop
        import tritonclient.http as th  # type: ignore[import-untyped]

        self._th, self._wire, self._gevent = th, wire, gevent
        options = {"ca_certs": str(wire.ca_file)} if wire.tls and wire.ca_file else None
        self._client = th.InferenceServerClient(wire.host, ssl=wire.tls, ssl_options=options,
                                                connection_timeout=wire.timeout_s, network_timeout=wire.timeout_s)
        self._stub = _CappedStub(self._client._client_stub, wire.max_answer_bytes, f"the answer of {wire.host}")
        self._client._client_stub = self._stub

    def _within_deadline(self, call: Callable[[], Any], *, max_bytes: int | None = None) -> Any:
        """`call()` interrupted where it blocks (connecting, sending, reading) once the request's deadline passes:
        DeadlineExceeded then, whatever the per-read timeout would have allowed; its answer capped at `max_bytes`
        (default: the wire's cap on an infer answer)."""
        deadline = self._wire.deadline(f"a request to {self._wire.host}")
        expired = DeadlineExceeded(f"{deadline.what} took longer than {deadline.seconds:g} s")
        self._stub.max_bytes = max_bytes or self._wire.max_answer_bytes
        with self._gevent.Timeout(self._wire.timeout_s, expired):
            return call()

    def metadata(self) -> dict[str, Any]:
        meta: dict[str, Any] = self._within_deadline(lambda: self._client.get_model_metadata(
            self._wire.model, model_version=self._wire.version, headers=self._wire.headers()),
            max_bytes=MAX_METADATA_BYTES)
        return meta

    def infer(self, name: str, tensor: np.ndarray, datatype: str, outputs: list[str]) -> Answer:
        th, wire = self._th, self._wire
        item = th.InferInput(name, list(tensor.shape), datatype)
        item.set_data_from_numpy(tensor, binary_data=True)
        asked = [th.InferRequestedOutput(out, binary_data=True) for out in outputs]
        result = self._within_deadline(lambda: self._client.infer(wire.model, [item], model_version=wire.version,
                                                                  outputs=asked, headers=wire.headers()))
        response = result.get_response() or {}
        return Answer(tuple(result.as_numpy(out) for out in outputs), dict(response.get("parameters") or {}))

    def stats(self) -> dict[str, Any]:
        """The statistics extension's `v2/models/<m>/stats` (Triton's; raises where the server has none)."""
        found: dict[str, Any] = self._within_deadline(lambda: self._client.get_inference_statistics(
            self._wire.model, self._wire.version, headers=self._wire.headers()), max_bytes=MAX_METADATA_BYTES)
        return found

    def close(self) -> None:
        self._client.close()


class _CappedStub:
    """geventhttpclient's client as tritonclient uses it (`get`, `post`, `close`), each answer checked against the
    cap before its body is read (Content-Length) and while it is read, and refused when it comes compressed
    unasked. A refused answer's connection is closed, not returned to the pool half-read."""

    def __init__(self, stub: Any, max_bytes: int, what: str) -> None:
        self._stub, self.max_bytes, self._what = stub, max_bytes, what  # max_bytes: set per call (one thread)

    def get(self, *args: Any, **kwargs: Any) -> Any:
        return self._capped(self._stub.get(*args, **kwargs))

    def post(self, *args: Any, **kwargs: Any) -> Any:
        return self._capped(self._stub.post(*args, **kwargs))

    def close(self) -> None:
        self._stub.close()

    def _capped(self, response: Any) -> _CappedResponse:
        try:
            check_declared({"Content-Length": str(response.get("content-length") or "")}, self.max_bytes,
                           self._what)
            encoding = response.get("content-encoding")
            if encoding and str(encoding).lower() != "identity":
                raise NetRefused(f"{self._what}: compressed ({str(encoding)[:20]}) although no compression was "
                                 "asked for")
        except NetRefused:
            _discard(response)
            raise
        return _CappedResponse(response, self.max_bytes, self._what)


class _CappedResponse:
    """A geventhttpclient response whose reads stop at the cap (AnswerTooLarge, the connection closed)."""

    def __init__(self, response: Any, max_bytes: int, what: str) -> None:
        self._response, self._max_bytes, self._what = response, max_bytes, what
        self._total = 0

    def read(self, length: int | None = None) -> bytes:
        if length is not None:
            return self._counted(self._response.read(length))
        parts = []
        while chunk := self._response.read(CHUNK):
            parts.append(self._counted(chunk))
        return b"".join(parts)

    def _counted(self, chunk: bytes) -> bytes:
        self._total += len(chunk)
        if self._total > self._max_bytes:
            _discard(self._response)
            raise AnswerTooLarge(f"{self._what}: the answer is larger than {self._max_bytes} bytes")
        return bytes(chunk)

    def get(self, key: str, default: Any = None) -> Any:
        return self._response.get(key, default)

    def __getitem__(self, key: str) -> Any:
        return self._response[key]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._response, name)


def _discard(response: Any) -> None:
    """Close a response's connection rather than return it to the pool with an unread body in it."""
    sock, pool = getattr(response, "_sock", None), getattr(response, "_pool", None)
    response._sock = response._pool = None
    if sock is not None:
        with contextlib.suppress(Exception):  # already gone
            pool.release_socket(sock) if pool is not None else sock.close()


class GrpcTransport:
    """gRPC, tensors as raw bytes. The client is thread-safe (several requests may be in flight)."""

    protocol = "grpc"

    def __init__(self, wire: Wire) -> None:
        import tritonclient.grpc as tg  # type: ignore[import-untyped]

        self._tg, self._wire = tg, wire
        ca = str(wire.ca_file) if wire.tls and wire.ca_file else None
        self._client = tg.InferenceServerClient(wire.host, ssl=wire.tls, root_certificates=ca,
                                                channel_args=_channel_args(tg, wire.max_answer_bytes))

    def metadata(self) -> dict[str, Any]:
        meta: dict[str, Any] = self._client.get_model_metadata(
            self._wire.model, model_version=self._wire.version, headers=self._wire.headers(), as_json=True,
            client_timeout=self._wire.timeout_s)
        return meta  # as JSON, shapes are strings ('-1'): app.inference.remote.graph reads both

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


def _channel_args(tg: Any, max_answer_bytes: int) -> list[tuple[str, Any]]:
    """tritonclient's own channel options, the answer's size capped at `max_answer_bytes` (gRPC refuses a message
    declaring more before its body arrives: RESOURCE_EXHAUSTED 'larger than max')."""
    keepalive = tg.KeepAliveOptions()
    return [("grpc.max_send_message_length", GRPC_MESSAGE_LIMIT),
            ("grpc.max_receive_message_length", max(1, min(max_answer_bytes, GRPC_MESSAGE_LIMIT))),
            ("grpc.keepalive_time_ms", keepalive.keepalive_time_ms),
            ("grpc.keepalive_timeout_ms", keepalive.keepalive_timeout_ms),
            ("grpc.keepalive_permit_without_calls", keepalive.keepalive_permit_without_calls),
            ("grpc.http2.max_pings_without_data", keepalive.http2_max_pings_without_data)]


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
