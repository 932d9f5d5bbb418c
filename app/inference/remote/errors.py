"""A remote call's failures as one line each, and the bounded retry with backoff around every call.

What tritonclient 2.73 raises (what a user sees of it: docs/remote.md, "Timeouts and retries"):
`InferenceServerException` with an HTTP status as a string ('401') or a gRPC code ('StatusCode.UNAVAILABLE'); over
HTTP also the builtin `ConnectionRefusedError`, `TimeoutError`, `ssl.SSLCertVerificationError` and
geventhttpclient's `HTTPConnectionClosed` (a pooled keep-alive connection the server closed). Retried: the server
unreachable, overloaded (503, RESOURCE_EXHAUSTED), a model not ready, a timeout, a closed connection. Never retried:
401/403 (auth), 404 (no such model), 400 and the model's own errors, a certificate not trusted — another try would
only say the same.
"""

from __future__ import annotations

import logging
import socket
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from app.errors import InferenceError, one_line
from app.guard.net import NetRefused

log = logging.getLogger(__name__)
T = TypeVar("T")
MAX_BACKOFF_S = 8.0


class RemoteError(InferenceError):
    """A remote session's failure, one line: "remote host:port/model: <what> (HTTP 401 unauthorized)". `kind`
    ("auth", "tls", "timeout", "unreachable", "model", "url", "cancelled", "answer" for an answer refused by
    app.guard (too large, not what the metadata declared, not finite), "" otherwise) lets a face add its own
    advice. `hint` is the CLI's (its options, e.g. "--token-env, …"): str(error) is `message (hint)`, as the CLI
    prints it; `message` is the line without it, for a face with its own words (the viewer). The session's own
    errors have no hint; the CLI gives one (`with_hint`)."""

    def __init__(self, message: str, *, retryable: bool = False, kind: str = "", hint: str | None = None) -> None:
        super().__init__(f"{message} ({hint})" if hint else message)
        self.message, self.retryable, self.kind, self.hint = message, retryable, kind, hint or None

    def with_hint(self, hint: str | None) -> RemoteError:
        """The same error with `hint` (None: none), to raise `from` this one."""
        return RemoteError(self.message, retryable=self.retryable, kind=self.kind, hint=hint)


@dataclass(frozen=True)
class Failure:
    what: str  # the line's part after "remote host/model: "
    retryable: bool
    kind: str = ""  # RemoteError.kind


_HTTP = {
    "400": ("the server refused the request as malformed (HTTP 400{why})", False),
    "401": ("refused: not authorised (HTTP 401{why}): no token or a wrong one", False),
    "403": ("refused: forbidden (HTTP 403{why}): the credentials are not allowed this model", False),
    "404": ("no such model on the server (HTTP 404{why})", False),
    "408": ("the server timed out the request (HTTP 408{why})", True),
    "429": ("the server is overloaded (HTTP 429{why})", True),
    "500": ("the server failed running the model (HTTP 500{why})", False),
    "502": ("a proxy before the server could not reach it (HTTP 502{why})", True),
    "503": ("the server is unavailable or the model not ready (HTTP 503{why})", True),
    "504": ("a proxy before the server timed out (HTTP 504{why})", True),
}
_GRPC = {
    "UNAUTHENTICATED": ("refused: not authorised (gRPC UNAUTHENTICATED{why}): no token or a wrong one", False),
    "PERMISSION_DENIED": ("refused: forbidden (gRPC PERMISSION_DENIED{why})", False),
    "NOT_FOUND": ("no such model on the server (gRPC NOT_FOUND{why})", False),
    "INVALID_ARGUMENT": ("the server refused the request (gRPC INVALID_ARGUMENT{why})", False),
    "UNAVAILABLE": ("server unreachable (gRPC UNAVAILABLE{why})", True),
    "DEADLINE_EXCEEDED": ("no answer within the timeout (gRPC DEADLINE_EXCEEDED{why})", True),
    "RESOURCE_EXHAUSTED": ("the server is overloaded or the message too large (gRPC RESOURCE_EXHAUSTED{why})", True),
    "ABORTED": ("the server aborted the request (gRPC ABORTED{why})", True),
    "CANCELLED": ("the request was cancelled, the server stopping? (gRPC CANCELLED{why})", True),
}
_KINDS = {"401": "auth", "403": "auth", "UNAUTHENTICATED": "auth", "PERMISSION_DENIED": "auth",
          "DEADLINE_EXCEEDED": "timeout", "408": "timeout", "504": "timeout", "404": "model", "NOT_FOUND": "model"}
# a gRPC UNAVAILABLE of the connection itself (the server gone), not one the server answered with
_CONNECTION_WORDS = ("failed to connect", "connect failed", "connection refused", "socket closed", "connection reset",
                     "dns", "all backends", "tcp", "broken pipe", "goaway", "network", "unreachable")
_TLS_WORDS = ("certificate_verify_failed", "handshake", "tsi_", "ssl_error", "certificate")


def classify(exc: BaseException, *, timeout_s: float) -> Failure:
    """What went wrong, in words, and whether another try may help."""
    if isinstance(exc, RemoteError):
        return Failure(exc.message.split(": ", 1)[-1], exc.retryable, exc.kind)
    if isinstance(exc, ssl.SSLCertVerificationError):
        return Failure(f"the server's TLS certificate is not trusted ({exc.verify_message or 'verify failed'}): "
                       "trust the CA that signed it", False, "tls")
    if isinstance(exc, ssl.SSLError):
        return Failure(f"TLS failed ({one_line(exc, most=160)}): is the server on https / grpcs?", False, "tls")
    if isinstance(exc, ConnectionRefusedError):
        return Failure("server unreachable (connection refused)", True, "unreachable")
    if isinstance(exc, TimeoutError | socket.timeout):  # the gate's DeadlineExceeded too: the whole request's
        return Failure(f"no answer within {timeout_s:g} s", True, "timeout")
    if isinstance(exc, NetRefused):  # the gate refused the answer (too large, compressed unasked): once is enough
        return Failure(one_line(exc, most=200).split(": ", 1)[-1], False, "answer")
    if isinstance(exc, socket.gaierror):
        return Failure(f"unknown host ({one_line(exc, most=120)})", False)
    if type(exc).__name__ == "HTTPConnectionClosed":  # geventhttpclient: a stale keep-alive, or http to https
        return Failure("the server closed the connection", True)
    if isinstance(exc, OSError):
        return Failure(f"connection failed ({one_line(exc, most=160, typed=True)})", True)
    status = getattr(exc, "status", None)
    if callable(status):  # tritonclient's InferenceServerException, looked up without importing tritonclient
        return _server_failure(str(status() or ""), str(getattr(exc, "message", lambda: "")() or exc))
    return Failure(one_line(exc, most=200, typed=True), False)


def _server_failure(status: str, message: str) -> Failure:
    code = status.removeprefix("StatusCode.")
    why = one_line(ValueError(message), most=160)
    if code == "RESOURCE_EXHAUSTED" and "larger than max" in message.lower():  # our receive limit: no retry
        return Failure(f"the answer is larger than the limit (gRPC RESOURCE_EXHAUSTED: {why})", False, "answer")
    if code == "UNAVAILABLE" and any(word in message.lower() for word in _TLS_WORDS):
        return Failure(f"TLS handshake failed ({why}): the server's certificate is not trusted or it does not "
                       "speak TLS", False, "tls")
    if code == "UNAVAILABLE" and not any(word in message.lower() for word in _CONNECTION_WORDS):
        # the server answered: busy or its model not ready, as HTTP says it with a 503
        return Failure(f"the server is unavailable or the model not ready (gRPC UNAVAILABLE: {why})", True,
                       "unreachable")
    known = _HTTP.get(code) or _GRPC.get(code)
    if known is not None:
        text, retryable = known
        return Failure(text.format(why=f": {why}" if why and why.lower() not in text.lower() else ""), retryable,
                       _KINDS.get(code, "unreachable" if retryable else ""))
    if "decoding the response" in message:  # a reply not of the protocol (a proxy's page, another API)
        return Failure(f"the server's answer is not the Open Inference Protocol ({why})", False)
    label = f"HTTP {code}" if code.isdigit() else (f"gRPC {code}" if code else "error")
    return Failure(f"{label}: {why}" if why else label, code.isdigit() and code.startswith("5"))


def with_retry(call: Callable[[], T], *, where: str, retries: int, backoff_s: float, timeout_s: float,
               on_retry: Callable[[str], None] | None = None,
               sleep: Callable[[float], None] = time.sleep) -> T:
    """`call()`, tried again after a wait (backoff_s, doubling, at most MAX_BACKOFF_S) up to `retries` times
    while its failure may pass; `on_retry(line)` before each wait. Raises RemoteError: one line naming `where`."""
    attempts = max(retries, 0) + 1
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except Exception as exc:  # tritonclient, gevent and grpc raise their own types (classify)
            failure = classify(exc, timeout_s=timeout_s)
            if not failure.retryable or attempt == attempts:
                tried = f" (tried {attempts} times)" if failure.retryable and attempts > 1 else ""
                raise RemoteError(f"{where}: {failure.what}{tried}", retryable=failure.retryable,
                                  kind=failure.kind) from exc
            wait = min(backoff_s * 2 ** (attempt - 1), MAX_BACKOFF_S)
            line = f"{where}: {failure.what} — retrying in {wait:g} s (attempt {attempt + 1} of {attempts})"
            log.info("%s", line)
            if on_retry is not None:
                on_retry(line)
            sleep(wait)
    raise AssertionError("unreachable")  # the loop returns or raises
