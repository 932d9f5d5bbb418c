"""The guarded requests session of app.guard.net (DICOMweb's): every request bounded by a deadline for the whole of
it — the connection, the headers (a watchdog shuts the socket when the deadline passes) and the body, read one
socket read at a time —, an answer-size cap counted over every read, gzip inflated here a socket read at a time,
and redirects followed only within the same origin. Made by `app.guard.net_session.guarded_session`; not a second gate.
"""

from __future__ import annotations

import socket
import threading
import zlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from app.guard.net import (
    CHUNK,
    AnswerTooLarge,
    Deadline,
    NetRefused,
    _Watchdog,
    check_declared,
    redirect_problem,
)

if TYPE_CHECKING:
    import requests
    import requests.adapters

_CURRENT = threading.local()  # the watchdog of the request a thread is sending through a guarded session


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
            if getattr(_CURRENT, "watchdog", None) is not None:  # a redirect's next hop, sent by requests from
                return super().send(request, **kwargs)  # inside the first: the same deadline and watchdog
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
                with watchdog.armed():  # the connection, the headers, every redirect and (not streamed) the body
                    response = super().send(request, **kwargs)  # each answer wrapped by the adapter, 3xx included
                    if not wanted_stream:
                        _ = response.content  # read now, through the gate
                        watchdog.check()  # a body without a length just ends where the watchdog shut the socket
            finally:
                _CURRENT.watchdog = None
            return response

    session = _Guarded()
    session.trust_env = False
    session.max_redirects = 5
    session.headers["Accept-Encoding"] = "gzip, deflate"  # what _GuardedRaw inflates itself, bounded
    for prefix in ("http://", "https://"):
        session.mount(prefix, _watched_adapter(max_bytes=max_bytes, what=what))
    return session


def _watched_adapter(*, max_bytes: int, what: str) -> requests.adapters.HTTPAdapter:
    """requests' adapter whose urllib3 connections hand their socket to the sending thread's watchdog: a new one
    as soon as it exists (before a TLS handshake), a pooled one when it is asked for an answer. Every answer it
    builds — a redirect's too, whose body requests reads itself before following it — is read only through the
    gate (`_GuardedRaw`), its declared length checked first: nothing of a body reaches requests or urllib3's own
    decoder unbounded."""
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

        def build_response(self, req: requests.PreparedRequest, resp: Any) -> requests.Response:
            watchdog: _Watchdog | None = getattr(_CURRENT, "watchdog", None)
            try:
                if watchdog is None:
                    raise NetRefused(f"{what}: an answer read outside its guarded session's send; refused")
                check_declared(resp.headers, max_bytes, what)
                guarded = _GuardedRaw(resp, watchdog, max_bytes, what)
            except NetRefused:
                resp.close()  # its body is never read; the connection is not reused
                raise
            response = super().build_response(req, resp)
            response.raw = guarded
            return response

    return Adapter()


def _watch(sock: socket.socket) -> socket.socket:
    watchdog: _Watchdog | None = getattr(_CURRENT, "watchdog", None)
    return watchdog.watch(sock) if watchdog is not None else sock


class _GuardedRaw:
    """urllib3's response, read one socket read at a time against the deadline and the size cap — counted over
    every read of the answer, not per call — and inflated here, a socket read's worth at a time, so a few KB of
    gzip cannot become gigabytes in memory before the cap sees them. The deadline is checked before every socket
    read, inflated bytes or not (endless empty deflate blocks give none), the bytes on the wire are capped too,
    and a body that ends once the deadline has passed (the watchdog shut its socket) is DeadlineExceeded, not a
    whole answer."""

    def __init__(self, raw: Any, watchdog: _Watchdog, max_bytes: int, what: str) -> None:
        self._raw = raw
        self._watchdog = watchdog
        self._deadline = watchdog.deadline
        self._max_bytes = max_bytes
        self._max_wire = max_bytes + max_bytes // 64 + 1024  # gzip of what does not compress is a little larger
        self._what = what
        self._total = 0
        self._wire = 0
        self._left = b""  # what a read(amt) took from the socket beyond amt
        encoding = str(raw.headers.get("Content-Encoding", "") or "").strip().lower()
        if encoding not in ("", "identity", "gzip", "x-gzip", "deflate"):
            raise NetRefused(f"{what}: the answer is encoded as {encoding[:40]!r}, which was not asked for")
        self._inflater = zlib.decompressobj(47) if encoding not in ("", "identity") else None  # gzip or zlib
        self._maybe_raw_deflate = encoding == "deflate"  # until its first bytes say which
        self._fed = False  # whether any compressed byte came (an empty body with a Content-Encoding is empty)

    def _too_large(self) -> AnswerTooLarge:
        return AnswerTooLarge(f"{self._what}: the answer is larger than {self._max_bytes} bytes")

    def _socket_read(self, n: int) -> bytes:
        """One socket read of at most `n` bytes as they came (no decoding), the deadline checked before it and
        after a timeout, the wire total capped."""
        self._deadline.check()
        try:
            data = bytes(self._raw.read1(n, decode_content=False))
        except TimeoutError:
            self._deadline.check()
            raise
        if not data:  # the end of the body, or where the watchdog shut the socket at the deadline
            self._watchdog.check()
            self._deadline.check()
        self._wire += len(data)
        if self._wire > self._max_wire:
            raise self._too_large()
        return data

    def _read1(self, n: int, decode: bool) -> bytes:
        if self._inflater is None or not decode:
            return self._socket_read(n)
        while True:
            data = self._inflater.unconsumed_tail
            if not data and self._inflater.eof:  # a gzip member ended: what follows it starts the next one
                data = self._inflater.unused_data or self._socket_read(n)
                if data:
                    self._inflater = zlib.decompressobj(47)
            data = data or self._socket_read(n)
            if not data:
                return self._ended()
            out = self._inflate(data, n)
            if out:
                return out

    def _inflate(self, data: bytes, n: int) -> bytes:
        """At most `n` inflated bytes of `data` (the rest kept as the inflater's tail); a corrupt body is NetRefused
        in one line, and "deflate" sent raw, without zlib's header (as some servers do), is read as such."""
        assert self._inflater is not None
        try:
            out = self._inflater.decompress(data, n)
        except zlib.error as exc:
            if self._maybe_raw_deflate:
                self._maybe_raw_deflate = False
                self._inflater = zlib.decompressobj(-zlib.MAX_WBITS)
                return self._inflate(data, n)
            raise NetRefused(f"{self._what}: the answer's compressed body is corrupt ({exc})") from None
        self._maybe_raw_deflate = False
        self._fed = True
        return out

    def _ended(self) -> bytes:
        """The end of a compressed body: NetRefused when it stopped inside a compressed stream (cut short — what
        had inflated would pass for the whole answer)."""
        assert self._inflater is not None
        if self._fed and not self._inflater.eof:
            raise NetRefused(f"{self._what}: the answer's compressed body ends before its end (cut short)")
        return self._inflater.flush()

    def stream(self, amt: int = CHUNK, decode_content: bool | None = None) -> Iterator[bytes]:
        size = min(amt or CHUNK, CHUNK)
        decode = decode_content is not False
        if self._left:
            left, self._left = self._left, b""
            yield left
        while True:
            chunk = self._read1(size, decode)
            if not chunk:
                return
            self._total += len(chunk)
            if self._total > self._max_bytes:
                raise self._too_large()
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

    def read1(self, amt: int = CHUNK, decode_content: bool | None = None) -> bytes:
        """At most `amt` bytes (one socket read's worth), through the gate like every other read."""
        return self.read(max(amt, 1) if amt is not None and amt >= 0 else CHUNK, decode_content)

    def __getattr__(self, name: str) -> Any:
        if name in _UNGUARDED_READS:
            raise NetRefused(f"{self._what}: the answer's body is read through the gate (read, read1, stream), "
                             f"not urllib3's {name}")
        return getattr(self._raw, name)


# urllib3's ways to a body that would pass the gate by: its whole `data`, its own chunked reader, its file object
_UNGUARDED_READS = frozenset({"data", "json", "read_chunked", "readinto", "readline", "readlines", "drain_conn", "fp",
                              "_fp"})
