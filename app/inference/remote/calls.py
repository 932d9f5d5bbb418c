"""How a remote session's calls are made: from any thread, each one cancellable (RemoteSession.cancel).

gRPC: one thread-safe client; a request goes out with `async_infer`, the caller waits on its answer and, when the
session is cancelled, cancels the call itself (the server sees the RPC cancelled; nothing is left half-read).
HTTP: tritonclient.http's client is gevent's and works only on the thread that made it (another thread using it
fails with greenlet's "Cannot switch to a different thread"), so EVERY HTTP call — metadata, statistics, requests,
closing — is made on the session's own sender threads, each with its client made, used and closed there and
nowhere else; callers (the CLI's thread, a folder run's in-flight helpers, the viewer's inference thread) hand the
call over and wait. A cancelled caller returns at once; its sender finishes (or times out) on its own, its answer
dropped, and the session takes no more calls, so a late answer never reaches a later run.

Every call has a deadline, whole: the transports bound their own requests (gRPC's deadline, a
gevent.Timeout around each HTTP call), and a caller waits at most that long and DEADLINE_GRACE_S more — then the
request is cancelled as a session's cancel() would cancel it (gRPC's call cancelled; an HTTP sender left to its
own deadline, its answer dropped) and the caller gets the gate's DeadlineExceeded, which the retry counts as a
timeout. A sender whose request was refused by the gate (too slow, too large) lets its client go: a connection
cut mid-answer is never used again.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar, cast

import numpy as np

from app.guard.net import Deadline, DeadlineExceeded, NetRefused
from app.inference.remote.errors import RemoteError
from app.inference.remote.transport import Answer, GrpcTransport, Transport, Wire, open_transport

log = logging.getLogger(__name__)
T = TypeVar("T")
MAX_SENDERS = 16  # HTTP calls a session makes at once (each sender thread holds one client and its connection)
POLL_S = 0.05  # how often a waiting caller looks at the session's cancel flag (cancel returns within this)
DEADLINE_GRACE_S = 1.0  # a caller waits this long past a request's deadline for the transport's own error


class _Pending:
    """One call's outcome, settled once by whoever finished it (a sender thread, gRPC's callback thread)."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: Any = None
        self.error: BaseException | None = None

    def settle(self, value: Any, error: BaseException | None) -> None:
        self.value, self.error = value, error
        self.done.set()


class _Senders:
    """Daemon threads, started as needed up to `most`, each with its own HTTP transport (made on first use, closed
    when the senders close). Daemon: a sender stuck on a server that never answers does not hold up the exit."""

    def __init__(self, make: Callable[[], Transport], most: int) -> None:
        self._make, self._most = make, most
        self._jobs: queue.SimpleQueue[tuple[Callable[[Transport], Any], _Pending] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = self._idle = 0
        self._closed = False

    def submit(self, job: Callable[[Transport], Any], pending: _Pending) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError("the session's senders are closed")
            if self._idle == 0 and self._threads < self._most:
                self._threads += 1
                threading.Thread(target=self._loop, name=f"remote-http-{self._threads}", daemon=True).start()
        self._jobs.put((job, pending))

    def _loop(self) -> None:
        transport: Transport | None = None
        with self._lock:
            self._idle += 1
        try:
            while True:
                item = self._jobs.get()
                with self._lock:
                    self._idle -= 1
                if item is None:  # close(): one None per thread
                    return
                job, pending = item
                value, error = None, None
                try:
                    transport = transport or self._make()
                    value = job(transport)
                except BaseException as exc:  # handed to the waiting caller, which classifies it
                    error = exc
                    if isinstance(exc, NetRefused) and transport is not None:  # cut mid-answer: not used again
                        _close(transport)
                        transport = None
                with self._lock:  # idle again BEFORE the caller hears back: its next call finds this thread
                    self._idle += 1
                pending.settle(value, error)
                value = error = None
        finally:
            if transport is not None:  # closed on the thread that made it (gevent)
                try:
                    transport.close()
                except Exception:  # a connection already gone: nothing to let go
                    log.debug("closing a sender's HTTP client", exc_info=True)

    def close(self) -> None:
        with self._lock:
            self._closed, count = True, self._threads
        for _ in range(count):
            self._jobs.put(None)


def _close(transport: Transport) -> None:
    """Close `transport` (on its own thread), quietly: a connection cut by the gate may already be gone."""
    try:
        transport.close()
    except Exception:
        log.debug("closing a sender's HTTP client after a refused answer", exc_info=True)


class Calls:
    """A session's calls, from any thread; `cancel()` makes a waiting one raise RemoteError 'cancelled' within
    POLL_S, and every later one at once."""

    def __init__(self, where: str, wire: Wire, protocol: str) -> None:
        self.where, self.protocol = where, protocol
        self._timeout_s = wire.timeout_s
        self._cancelled = threading.Event()
        self._grpc = cast(GrpcTransport, open_transport(wire, "grpc")) if protocol == "grpc" else None
        self._senders = None if self._grpc is not None else _Senders(lambda: open_transport(wire, "http"),
                                                                     MAX_SENDERS)

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def error(self) -> RemoteError:
        return RemoteError(f"{self.where}: cancelled", kind="cancelled")

    def check(self) -> None:
        """Raise the cancelled error when the session was cancelled."""
        if self._cancelled.is_set():
            raise self.error()

    def sleep(self, seconds: float) -> None:
        """A backoff wait that a cancel cuts short (with_retry's `sleep`)."""
        if self._cancelled.wait(seconds):
            raise self.error()

    def infer(self, name: str, tensor: np.ndarray, datatype: str, outputs: list[str]) -> Answer:
        """One request (no retry here), cancellable while in flight."""
        self.check()
        pending = _Pending()
        if self._grpc is not None:
            deadline = self._deadline()
            stop = self._grpc.start_infer(name, tensor, datatype, outputs, pending.settle)
            return cast(Answer, self._wait(pending, stop, deadline))
        return self.call(lambda transport: transport.infer(name, tensor, datatype, outputs))

    def call(self, job: Callable[[Transport], T]) -> T:
        """`job(transport)` on a transport it may use: gRPC's shared client here, on this thread (its calls have
        a deadline); HTTP on a sender thread, waited for cancellably."""
        self.check()
        if self._grpc is not None:
            return job(self._grpc)
        assert self._senders is not None  # HTTP
        pending = _Pending()
        deadline = self._deadline()
        try:
            self._senders.submit(job, pending)
        except RuntimeError:  # closed meanwhile
            raise self.error() from None
        return cast(T, self._wait(pending, lambda: None, deadline))

    def _deadline(self) -> Deadline:
        return Deadline(self._timeout_s + DEADLINE_GRACE_S, f"a request to {self.where}")

    def _wait(self, pending: _Pending, stop: Callable[[], None], deadline: Deadline) -> Any:
        while not pending.done.wait(POLL_S):
            if self._cancelled.is_set():
                stop()
                raise self.error()
            if deadline.expired():  # the transport's own deadline did not fire: the request is given up here
                stop()
                raise DeadlineExceeded(f"{deadline.what} took longer than {self._timeout_s:g} s")
        if self._cancelled.is_set():  # answered as the session was cancelled: dropped, as any later one
            raise self.error()
        error, pending.error = pending.error, None
        if error is None:
            return pending.value
        try:
            raise error
        finally:  # no cycle error → traceback → this frame → error: the session (its channel) goes when dropped
            error = None

    def cancel(self) -> None:
        self._cancelled.set()

    def close(self) -> None:
        """Cancel, then let the connections go: gRPC's channel here, each sender's client on its own thread."""
        self.cancel()
        if self._senders is not None:
            self._senders.close()
        if self._grpc is not None:
            self._grpc.close()
