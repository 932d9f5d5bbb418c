"""app.guard.net: a deadline per request (connection, headers and every byte of the body), an answer-size cap, no
redirect to another origin, no credentials in clear text — against real loopback servers (issue 36)."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import urllib.error
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from app.guard.net import (
    AnswerTooLarge,
    DeadlineExceeded,
    NetRefused,
    credentials_problem,
    fetch,
    is_loopback,
    origin,
    redirect_problem,
    same_origin,
    shown_url,
)
from app.guard.net_session import guarded_session


@contextlib.contextmanager
def server(answer: Callable[[BaseHTTPRequestHandler], None]) -> Iterator[tuple[str, list[str]]]:
    """A loopback server whose every request is answered by `answer(handler)`: (its origin, the requests seen
    with whether they carried an Authorization header)."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def handle_one(self) -> None:
            seen.append(f"{self.command} {self.path} auth={'Authorization' in self.headers}")
            with contextlib.suppress(OSError):
                answer(self)

        do_GET = do_POST = handle_one

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", seen
    finally:
        httpd.shutdown()
        httpd.server_close()


def _ok(body: bytes) -> Callable[[BaseHTTPRequestHandler], None]:
    def answer(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)
    return answer


def _trickle_body(h: BaseHTTPRequestHandler) -> None:
    h.send_response(200)
    h.send_header("Content-Length", "1000")
    h.end_headers()
    for _ in range(1000):
        h.wfile.write(b"x")
        h.wfile.flush()
        time.sleep(0.1)


def _trickle_headers(h: BaseHTTPRequestHandler) -> None:
    h.wfile.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
    for _ in range(1000):  # one header's value, a byte at a time (http.client reads a line of up to 64 KiB)
        h.wfile.write(b"x")
        h.wfile.flush()
        time.sleep(0.1)


def _endless_chunked(h: BaseHTTPRequestHandler) -> None:
    h.send_response(200)
    h.send_header("Transfer-Encoding", "chunked")
    h.end_headers()
    chunk = b"x" * 65536
    for _ in range(100_000):
        h.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))


def _declares_huge(h: BaseHTTPRequestHandler) -> None:
    h.send_response(200)
    h.send_header("Content-Length", str(50 * 10**9))
    h.end_headers()
    h.wfile.write(b"x" * 100)
    h.wfile.flush()
    time.sleep(5)


def _session_get(url: str, **kwargs: object) -> bytes:
    with guarded_session(deadline_s=kwargs.pop("deadline_s", 1.5), max_bytes=kwargs.pop("max_bytes", 1 << 20)) \
            as session:  # type: ignore[arg-type]
        return bytes(session.get(url, timeout=1.0, **kwargs).content)


def _fetch(url: str, **kwargs: object) -> bytes:
    return fetch(url, deadline_s=kwargs.pop("deadline_s", 1.5), max_bytes=kwargs.pop("max_bytes", 1 << 20),
                 **kwargs)  # type: ignore[arg-type]


_CLIENTS = {"fetch": _fetch, "session": _session_get}


@pytest.mark.parametrize("client", sorted(_CLIENTS))
def test_a_plain_answer(client: str) -> None:
    with server(_ok(b"hello")) as (url, _):
        assert _CLIENTS[client](url + "/x") == b"hello"


@pytest.mark.parametrize("client", sorted(_CLIENTS))
@pytest.mark.parametrize("answer", [_trickle_body, _trickle_headers], ids=["body", "headers"])
def test_the_deadline_covers_a_trickle(client: str, answer: Callable[[BaseHTTPRequestHandler], None]) -> None:
    """One byte (or one header line) each 0.1 s satisfies any per-read timeout; the request's deadline of 1.5 s
    ends it all the same."""
    with server(answer) as (url, _):
        started = time.monotonic()
        with pytest.raises((DeadlineExceeded, TimeoutError)):
            _CLIENTS[client](url + "/slow")
        assert time.monotonic() - started < 4


@pytest.mark.parametrize("client", sorted(_CLIENTS))
def test_an_endless_answer_is_cut_at_the_cap(client: str) -> None:
    with server(_endless_chunked) as (url, _):
        started = time.monotonic()
        with pytest.raises(AnswerTooLarge):
            _CLIENTS[client](url + "/endless", max_bytes=1 << 20, deadline_s=10)
        assert time.monotonic() - started < 5


@pytest.mark.parametrize("client", sorted(_CLIENTS))
def test_a_declared_length_over_the_cap_is_refused_before_the_body(client: str) -> None:
    with server(_declares_huge) as (url, _):
        started = time.monotonic()
        with pytest.raises(AnswerTooLarge, match="declares 50000000000 bytes"):
            _CLIENTS[client](url + "/huge", deadline_s=10)
        assert time.monotonic() - started < 4  # the server holds the rest for 5 s: refused before it


def _short_body(h: BaseHTTPRequestHandler) -> None:
    h.send_response(200)
    h.send_header("Content-Length", "1000")
    h.send_header("Connection", "close")
    h.end_headers()
    h.wfile.write(b"name: x\n")
    h.wfile.flush()
    h.close_connection = True


@pytest.mark.parametrize("client", sorted(_CLIENTS))
def test_an_answer_shorter_than_it_declared_is_refused(client: str) -> None:
    """A lying Content-Length (the server closes early): not taken for the whole answer."""
    with server(_short_body) as (url, _), pytest.raises(OSError):
        _CLIENTS[client](url + "/short")


def _redirect_to(target: str) -> Callable[[BaseHTTPRequestHandler], None]:
    def answer(h: BaseHTTPRequestHandler) -> None:
        h.send_response(307)
        h.send_header("Location", target + h.path)
        h.send_header("Content-Length", "0")
        h.end_headers()
    return answer


def test_a_redirect_to_another_origin_is_not_followed() -> None:
    with server(_ok(b"elsewhere")) as (other, reached), server(_redirect_to(other)) as (url, _):
        with guarded_session(deadline_s=2, max_bytes=1 << 20) as session, \
                pytest.raises(NetRefused, match="another host or scheme: not followed"):
            session.post(url + "/studies", data=b"patient data", headers={"Authorization": "Bearer t0ken"})
        with pytest.raises(urllib.error.HTTPError) as caught:
            fetch(url + "/model.yaml", deadline_s=2, max_bytes=1 << 20, headers={"Authorization": "Bearer t0ken"})
        assert caught.value.code == 307
    assert reached == []


def test_a_redirect_within_the_origin_is_followed_by_the_session() -> None:
    def answer(h: BaseHTTPRequestHandler) -> None:
        if h.path == "/old":
            _redirect_to("")(h)
        else:
            _ok(b"moved")(h)

    def relative(h: BaseHTTPRequestHandler) -> None:
        h.send_response(302)
        h.send_header("Location", "/new")
        h.send_header("Content-Length", "0")
        h.end_headers()

    with server(lambda h: relative(h) if h.path == "/old" else _ok(b"moved")(h)) as (url, seen):
        assert _session_get(url + "/old") == b"moved"
    assert [s.split(" ")[1] for s in seen] == ["/old", "/new"]
    del answer


@pytest.mark.parametrize(("url", "problem"), [
    ("http://pacs.hospital.org/dicom-web", True), ("https://pacs.hospital.org/dicom-web", False),
    ("http://127.0.0.1:8042/dicom-web", False), ("http://localhost:8000", False), ("http://[::1]:80/", False),
    ("http://127.8.9.10/", False), ("http://10.0.0.5/", True), ("http://localhost.evil.com/", True),
    ("grpcs://server:8001", False), ("grpc://server:8001", True),
])
def test_credentials_in_clear_text(url: str, problem: bool) -> None:
    found = credentials_problem(url)
    assert (found is not None) == problem
    if found:
        assert "clear text" in found and "allow_insecure" in found


def test_credentials_in_clear_text_allowed_by_the_named_setting_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="app.guard.net"):
        assert credentials_problem("http://pacs.lan/", allow_insecure=True, setting="--allow-insecure") is None
    assert "clear text to pacs.lan (--allow-insecure is set)" in caplog.text


@pytest.mark.parametrize(("a", "b", "same"), [
    ("http://h/a", "http://h:80/b", True), ("https://h/a", "https://H:443/", True), ("http://h/", "https://h/", False),
    ("http://h:8000/", "http://h:8001/", False), ("http://h/", "http://h.evil/", False),
])
def test_origins(a: str, b: str, same: bool) -> None:
    assert same_origin(a, b) is same
    assert (redirect_problem(a, b) is None) is same


def test_origin_fills_the_default_port() -> None:
    assert origin("https://Host/x") == ("https", "host", 443)


def test_shown_url_hides_credentials_and_query() -> None:
    assert shown_url("https://user:pw@host:1/qido/studies?PatientID=123#f") == "https://host:1/qido/studies"


@pytest.mark.parametrize(("host", "loop"), [("localhost", True), ("127.0.0.1", True), ("::1", True),
                                            ("[::1]", True), ("0.0.0.0", False), ("127.0.0.1.nip.io", False),
                                            ("example.com", False), ("a.localhost", True)])
def test_is_loopback(host: str, loop: bool) -> None:
    assert is_loopback(host) is loop


_BOMB: list[bytes] = []


def _gzip_bomb(h: BaseHTTPRequestHandler) -> None:
    body = _BOMB[0]
    h.send_response(200)
    h.send_header("Content-Encoding", "gzip")
    h.send_header("Content-Length", str(len(body)))
    h.end_headers()
    h.wfile.write(body)


def test_a_compressed_answer_is_capped_as_it_inflates() -> None:
    """The cap counts the bytes the caller gets: 200 KB of gzip that inflate to 200 MiB are refused at 1 MiB."""
    import gzip
    import tracemalloc

    if not _BOMB:
        _BOMB.append(gzip.compress(b"\0" * (200 << 20), 9))  # 200 MiB of zeros in about 200 KB, made beforehand
    with server(_gzip_bomb) as (url, _):
        tracemalloc.start()
        try:
            with pytest.raises(AnswerTooLarge):
                _session_get(url + "/bomb", deadline_s=20)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert peak < 64 << 20


@pytest.mark.parametrize("location", ["//evil.example/x", "https://h/a", "http://h:81/a", "http://user@evil/x"])
def test_a_redirect_elsewhere_however_it_is_spelt(location: str) -> None:
    assert redirect_problem("http://h/a", location) is not None


def test_the_cap_counts_every_read_of_a_streamed_answer() -> None:
    """A caller reading a streamed answer in pieces (raw.read(n) again and again, as a multipart reader does) is
    capped over the whole answer, not per read."""
    with server(_endless_chunked) as (url, _), guarded_session(deadline_s=20, max_bytes=1 << 20) as session:
        response = session.get(url + "/endless", stream=True, timeout=5)
        started = time.monotonic()
        with pytest.raises(AnswerTooLarge):
            while response.raw.read(65536):
                pass
        assert time.monotonic() - started < 5
