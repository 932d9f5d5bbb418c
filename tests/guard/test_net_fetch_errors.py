"""app.guard.net.fetch raises an HTTPError for a 3xx or an error status with its body closed unread: the status,
reason and headers (a redirect's Location) say what happened, and a body no cap bounds is not handed on — a
404 declaring 100 MB under a 1000-byte cap gave all 100 MB to whoever read the error before (issue 36)."""

from __future__ import annotations

import contextlib
import socket
import threading
import urllib.error
from collections.abc import Iterator

import pytest

from app.guard.net import fetch


@contextlib.contextmanager
def endless_error(status: bytes) -> Iterator[str]:
    """A loopback server answering `status` with a Location, a declared 100 MB and a body sent for ever."""
    listener = socket.create_server(("127.0.0.1", 0))

    def handle(conn: socket.socket) -> None:
        with contextlib.suppress(OSError), conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 " + status + b"\r\nLocation: /elsewhere\r\nContent-Length: 100000000\r\n\r\n")
            while True:
                conn.sendall(b"x" * 65536)

    def serve() -> None:
        with contextlib.suppress(OSError):
            while True:
                threading.Thread(target=handle, args=(listener.accept()[0],), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/"
    finally:
        listener.close()


@pytest.mark.parametrize("status", [b"404 Not Found", b"302 Found"])
def test_an_error_answer_is_raised_with_its_body_closed_unread(status: bytes) -> None:
    with endless_error(status) as url, pytest.raises(urllib.error.HTTPError) as caught:
        fetch(url, deadline_s=5, max_bytes=1000)
    assert caught.value.code == int(status.split()[0])
    assert caught.value.headers["Location"] == "/elsewhere"
    assert caught.value.read() == b""
