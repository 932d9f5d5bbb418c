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
import urllib.parse
import urllib.request
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import requests
    import requests.adapters

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
    with watchdog.armed(), opener.open(request, timeout=deadline.timeout()) as response:
        check_declared(response.headers, max_bytes, what)
        body = b"".join(capped_chunks(response.read1, max_bytes=max_bytes, deadline=deadline, what=what))
        watchdog.check()  # the end of the body may be the watchdog's doing
        if response.length:  # http.client's read1 ends quietly where the server closed early
            raise NetRefused(f"{what}: the answer ended after {len(body)} bytes; it declared "
                             f"{len(body) + response.length}")
        return body


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


_CURRENT = threading.local()  # the watchdog of the request a thread is sending through a guarded session


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None  # urllib then raises HTTPError with the 3xx


def guarded_session(*, deadline_s: float, max_bytes: int, what: str = "the server") -> requests.Session:
    """A requests Session whose every request is bounded by a deadline of `deadline_s` in all and `max_bytes`
    of answer (streams too: the body is read one socket read at a time through the gate), follows redirects
    only within the same origin, and ignores the environment's CA, netrc and proxy overrides."""
    import requests

    class _Guarded(requests.Session):
        def get_redirect_target(self, resp: requests.Response) -> str | None:
            target = super().get_redirect_target(resp)
            if target is not None:
                problem = redirect_problem(resp.url, target)
                if problem:
                    raise NetRefused(f"{what}: {problem}")
            return target

        def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:
            deadline = Deadline(deadline_s, f"a request to {what}")
            wanted_stream = kwargs.get("stream", False)
            kwargs["stream"] = True
            timeout = kwargs.get("timeout")
            per_read = timeout[1] if isinstance(timeout, tuple) else timeout
            connect = timeout[0] if isinstance(timeout, tuple) else timeout  # a filtered port: the caller's bound
            kwargs["timeout"] = (deadline.timeout(connect), deadline.timeout(per_read))
            watchdog = _Watchdog(deadline)
            _CURRENT.watchdog = watchdog
            try:
                with watchdog.armed():  # the connection, the headers and (not streamed) the body
                    response = super().send(request, **kwargs)
                    check_declared(response.headers, max_bytes, what)
                    response.raw = _GuardedRaw(response.raw, deadline, max_bytes, what)
                    if not wanted_stream:
                        _ = response.content  # read now, through the gate
            finally:
                _CURRENT.watchdog = None
            return response

    session = _Guarded()
    session.trust_env = False
    session.max_redirects = 5
    session.headers["Accept-Encoding"] = "gzip, deflate"  # what _GuardedRaw inflates itself, bounded
    for prefix in ("http://", "https://"):
        session.mount(prefix, _watched_adapter())
    return session


def _watched_adapter() -> requests.adapters.HTTPAdapter:
    """requests' adapter whose urllib3 connections hand their socket to the sending thread's watchdog: a new one
    as soon as it exists (before a TLS handshake), a pooled one when it is asked for an answer."""
    from requests.adapters import HTTPAdapter
    from urllib3.connection import HTTPConnection, HTTPSConnection
    from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

    def watched(base: type[HTTPConnection]) -> type[HTTPConnection]:
        class Watched(base):  # type: ignore[valid-type,misc]
            def _new_conn(self) -> socket.socket:
                return _watch(super()._new_conn())

            def getresponse(self, *args: Any, **kwargs: Any) -> Any:
                if self.sock is not None:
                    _watch(self.sock)
                return super().getresponse(*args, **kwargs)

        return Watched

    class Pool(HTTPConnectionPool):
        ConnectionCls = watched(HTTPConnection)

    class TlsPool(HTTPSConnectionPool):
        ConnectionCls = watched(HTTPSConnection)  # type: ignore[assignment]  # an HTTPSConnection still

    class Adapter(HTTPAdapter):
        def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
            super().init_poolmanager(*args, **kwargs)
            self.poolmanager.pool_classes_by_scheme = {"http": Pool, "https": TlsPool}

    return Adapter()


def _watch(sock: socket.socket) -> socket.socket:
    watchdog: _Watchdog | None = getattr(_CURRENT, "watchdog", None)
    return watchdog.watch(sock) if watchdog is not None else sock


class _GuardedRaw:
    """urllib3's response, read one socket read at a time against the deadline and the size cap — counted over
    every read of the answer, not per call — and inflated here, a socket read's worth at a time, so a few KB of
    gzip cannot become gigabytes in memory before the cap sees them."""

    def __init__(self, raw: Any, deadline: Deadline, max_bytes: int, what: str) -> None:
        self._raw = raw
        self._deadline = deadline
        self._max_bytes = max_bytes
        self._what = what
        self._total = 0
        self._left = b""  # what a read(amt) took from the socket beyond amt
        encoding = str(raw.headers.get("Content-Encoding", "") or "").strip().lower()
        if encoding not in ("", "identity", "gzip", "x-gzip", "deflate"):
            raise NetRefused(f"{what}: the answer is encoded as {encoding[:40]!r}, which was not asked for")
        self._inflater = zlib.decompressobj(47) if encoding not in ("", "identity") else None  # gzip or zlib

    def _read1(self, n: int, decode: bool) -> bytes:
        if self._inflater is None or not decode:
            return bytes(self._raw.read1(n, decode_content=False))
        while True:
            tail = self._inflater.unconsumed_tail
            data = tail or bytes(self._raw.read1(n, decode_content=False))
            if not data:
                return self._inflater.flush()
            out = self._inflater.decompress(data, n)
            if out or self._inflater.eof:
                return out

    def stream(self, amt: int = CHUNK, decode_content: bool | None = None) -> Iterator[bytes]:
        size = min(amt or CHUNK, CHUNK)
        decode = decode_content is not False
        if self._left:
            left, self._left = self._left, b""
            yield left
        while True:
            self._deadline.check()
            try:
                chunk = self._read1(size, decode)
            except TimeoutError:
                self._deadline.check()
                raise
            if not chunk:
                return
            self._total += len(chunk)
            if self._total > self._max_bytes:
                raise AnswerTooLarge(f"{self._what}: the answer is larger than {self._max_bytes} bytes")
            yield chunk

    def read(self, amt: int | None = None, decode_content: bool | None = None, **_: Any) -> bytes:
        got = bytearray()
        for chunk in self.stream(CHUNK if amt is None else min(amt, CHUNK), decode_content):
            got += chunk
            if amt is not None and len(got) >= amt:
                break
        if amt is not None and len(got) > amt:
            self._left = bytes(got[amt:])
            del got[amt:]
        return bytes(got)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)


__all__ = ["AnswerTooLarge", "Deadline", "DeadlineExceeded", "NetRefused", "capped_chunks", "check_declared",
           "credentials_problem", "fetch", "guarded_session", "is_loopback", "origin", "redirect_problem",
           "same_origin", "shown_url"]
