"""The one way SegLens talks to a server over HTTP, and the deadline every other protocol is bounded by.

A server is someone else's program. It may answer slowly on purpose (one byte a second keeps a per-read timeout
happy for ever), send an endless multipart stream, declare 50 GB, redirect a POST of patient data to another
host, or sit behind a clear-text URL on which a password would travel in the open. So every request here has:

- a **deadline per request** (`Deadline`), not per read: it covers the connection, the headers and every byte of
  the body, streams included; a read blocks at most until the deadline (plus one socket read timeout);
- an **answer-size cap**: a declared Content-Length over it is refused before the body is read, and the body is
  counted as it arrives;
- **no redirect to another origin** (scheme, host, port): refused in one line naming where it pointed;
- **no credentials in clear text** to a host that is not loopback (`credentials_problem`), unless the caller's
  named setting opts in (and then it is logged as a warning each time);
- credentials only for the origin they were configured for (`same_origin`).

`fetch` (urllib) serves one-off downloads; `guarded_session` (requests) is what DICOMweb uses; DIMSE and gRPC
clients are bounded by a `Deadline` they check between messages.
"""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import logging
import socket
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    pass

log = logging.getLogger(__name__)

CHUNK = 64 * 1024


class NetRefused(OSError):
    """A request refused by the gate (a redirect elsewhere, credentials in clear text, too large, too slow);
    the message is one line and never holds the URL's query or credentials."""


class DeadlineExceeded(NetRefused, TimeoutError):
    """The request's deadline passed (the whole request, not one read)."""


class AnswerTooLarge(NetRefused):
    """The answer is (or declared itself) larger than the caller's cap."""


@dataclass
class Deadline:
    """A point in time a whole request (or a whole C-FIND, a whole retrieve) must finish by."""

    seconds: float
    what: str = "the request"

    def __post_init__(self) -> None:
        self.at = time.monotonic() + self.seconds

    def remaining(self) -> float:
        return self.at - time.monotonic()

    def expired(self) -> bool:
        return self.remaining() <= 0

    def check(self) -> None:
        """DeadlineExceeded once the deadline has passed."""
        if self.expired():
            raise DeadlineExceeded(f"{self.what} took longer than {self.seconds:g} s")

    def timeout(self, per_read: float | None = None) -> float:
        """A socket timeout for the next read: what is left, at most `per_read`, never below 1 ms."""
        left = max(self.remaining(), 0.001)
        return min(left, per_read) if per_read is not None else left


def shown_url(url: str) -> str:
    """`url` as a message says it: no user:password@, no query, no fragment (a QIDO query holds a patient ID)."""
    parts = urllib.parse.urlsplit(url)
    netloc = parts.netloc.rsplit("@", 1)[-1]
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))[:300]


def origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) with the scheme's default port filled in."""
    parts = urllib.parse.urlsplit(url)
    default = {"http": 80, "https": 443}.get(parts.scheme.lower())
    return parts.scheme.lower(), (parts.hostname or "").lower(), parts.port or default


def same_origin(a: str, b: str) -> bool:
    """Whether two URLs are on the same scheme, host and port (where credentials may follow)."""
    return origin(a) == origin(b)


def is_loopback(host: str) -> bool:
    """Whether `host` is this machine: `localhost`, 127.0.0.0/8 or ::1 (by address, no DNS look-up)."""
    name = host.strip("[]").lower()
    if name in ("localhost", "localhost.localdomain") or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def credentials_problem(url: str, *, allow_insecure: bool = False, setting: str = "allow_insecure") -> str | None:
    """Why credentials must not be sent to `url` (clear text to a host that is not loopback), or None. With
    `allow_insecure` (the user's named setting) it is allowed, and a warning is logged every time."""
    scheme, host, _port = origin(url)
    if scheme in ("https", "grpcs") or is_loopback(host):
        return None
    if allow_insecure:
        log.warning("credentials sent in clear text to %s (%s is set)", host, setting)
        return None
    return (f"credentials would travel in clear text to {host} ({scheme}://): use https, or set {setting} to "
            "accept that risk")


def redirect_problem(from_url: str, location: str) -> str | None:
    """Why a redirect from `from_url` to `location` must not be followed (another origin), or None."""
    target = urllib.parse.urljoin(from_url, location)
    if same_origin(from_url, target):
        return None
    return (f"redirected to {shown_url(target)}, another host or scheme: not followed (the request's credentials "
            "and data would go along); give the final URL")


def check_declared(headers: Mapping[str, str], max_bytes: int, what: str) -> None:
    """AnswerTooLarge when the answer's Content-Length declares more than `max_bytes`."""
    declared = headers.get("Content-Length") or headers.get("content-length")
    if declared and declared.strip().isdigit() and int(declared) > max_bytes:
        raise AnswerTooLarge(f"{what}: the answer declares {int(declared)} bytes; the limit is {max_bytes}")


def capped_chunks(read1: Any, *, max_bytes: int, deadline: Deadline, what: str) -> Iterator[bytes]:
    """The body as chunks from `read1(n)` (one socket read each: a trickle returns byte by byte rather than
    blocking until a buffer is full), the deadline checked between reads and the total capped."""
    total = 0
    while True:
        deadline.check()
        chunk = read1(CHUNK)
        if not chunk:
            return
        total += len(chunk)
        if total > max_bytes:
            raise AnswerTooLarge(f"{what}: the answer is larger than {max_bytes} bytes")
        yield chunk


def fetch(url: str, *, deadline_s: float, max_bytes: int, headers: Mapping[str, str] | None = None,
          context: ssl.SSLContext | None = None, what: str = "the answer") -> bytes:
    """GET `url` within `deadline_s` seconds in all, at most `max_bytes`, no redirect followed (an HTTPError
    with the 3xx is raised, its Location readable), with urllib. NetRefused, urllib.error.HTTPError/URLError or
    OSError otherwise."""
    deadline = Deadline(deadline_s, what)
    request = urllib.request.Request(url, headers=dict(headers or {}))
    watchdog = _Watchdog(deadline)
    opener = urllib.request.build_opener(_NoRedirect, *_watched_handlers(watchdog, context))
    with watchdog.armed(), _open(opener, request, deadline.timeout()) as response:
        check_declared(response.headers, max_bytes, what)
        body = b"".join(capped_chunks(response.read1, max_bytes=max_bytes, deadline=deadline, what=what))
        watchdog.check()  # the end of the body may be the watchdog's doing
        if response.length:  # http.client's read1 ends quietly where the server closed early
            raise NetRefused(f"{what}: the answer ended after {len(body)} bytes; it declared "
                             f"{len(body) + response.length}")
        return body


def _open(opener: urllib.request.OpenerDirector, request: urllib.request.Request, timeout: float) -> Any:
    """`opener.open(request)`; an HTTPError (a 3xx, an error status) is raised with its body closed unread: its
    code, reason and headers say what happened, and its body, which no cap bounds, is not handed on."""
    try:
        return opener.open(request, timeout=timeout)
    except urllib.error.HTTPError as exc:
        exc.close()
        raise


class _Watchdog:
    """Shuts a request's sockets down when its deadline passes, so that a read blocked inside a library — headers
    or a TLS handshake trickled a byte at a time, which no per-read timeout ends — returns at once. The request
    then fails as DeadlineExceeded (`armed`)."""

    def __init__(self, deadline: Deadline) -> None:
        self.deadline = deadline
        self.fired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()

    def watch(self, sock: socket.socket) -> socket.socket:
        with self._lock:
            self._sockets.append(sock)
            fired = self.fired
        if fired:
            _shut(sock)
        return sock

    def check(self) -> None:
        """DeadlineExceeded when the watchdog has shut the sockets (an answer that ended there is cut short)."""
        if self.fired:
            raise DeadlineExceeded(f"{self.deadline.what} took longer than {self.deadline.seconds:g} s")

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            sockets = list(self._sockets)
        for sock in sockets:
            _shut(sock)

    @contextlib.contextmanager
    def armed(self) -> Iterator[None]:
        timer = threading.Timer(max(self.deadline.remaining(), 0.0), self._fire)
        timer.daemon = True
        timer.start()
        try:
            yield
        except (OSError, http.client.HTTPException, ValueError) as exc:
            if self.fired and not isinstance(exc, NetRefused):
                raise DeadlineExceeded(f"{self.deadline.what} took longer than {self.deadline.seconds:g} s") \
                    from None
            raise
        finally:
            timer.cancel()


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


def _watched_handlers(watchdog: _Watchdog, context: ssl.SSLContext | None) -> tuple[urllib.request.BaseHandler, ...]:
    """urllib's HTTP and HTTPS handlers whose connections hand their socket to `watchdog` as soon as it exists
    (before a TLS handshake)."""

    def watched(base: type[http.client.HTTPConnection]) -> type[http.client.HTTPConnection]:
        class Watched(base):  # type: ignore[valid-type,misc]
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, **kwargs)
                make = self._create_connection  # type: ignore[has-type]  # set by http.client's __init__
                self._create_connection = lambda *a, **k: watchdog.watch(make(*a, **k))

        return Watched

    http_connection, https_connection = watched(http.client.HTTPConnection), watched(http.client.HTTPSConnection)

    class Http(urllib.request.HTTPHandler):
        def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
            return self.do_open(http_connection, req)

    class Https(urllib.request.HTTPSHandler):
        def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
            return self.do_open(https_connection, req, context=context)

    return Http(), Https(context=context)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None  # urllib then raises HTTPError with the 3xx


__all__ = ["AnswerTooLarge", "Deadline", "DeadlineExceeded", "NetRefused", "capped_chunks", "check_declared",
           "credentials_problem", "fetch", "is_loopback", "origin", "redirect_problem",
           "same_origin", "shown_url"]
