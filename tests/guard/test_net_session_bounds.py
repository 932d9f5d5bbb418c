"""app.guard.net's session reads every answer through its capped, deadline-bounded reader: the body of a redirect
too (requests reads a 3xx body itself before following it), a body without a length that the deadline cut short, and
a gzip body that inflates to nothing while it arrives for ever — against real loopback servers (issue 36).

The client runs in a child process, so an answer read without a bound costs the child's memory (its own VmHWM,
measured around the request) and an endless read is killed at the test's time limit, not the test runner."""

from __future__ import annotations

import contextlib
import gzip
import json
import socket
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from app.guard.net import AnswerTooLarge, NetRefused
from app.guard.net_session import guarded_session

REPO = Path(__file__).resolve().parents[2]

_CHILD = r"""
import json, sys, time
from pathlib import Path
from app.guard.net_session import guarded_session

def hwm_kib():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0

url, deadline_s, max_bytes, stream = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "stream"
session = guarded_session(deadline_s=deadline_s, max_bytes=max_bytes)
before, started, answer = hwm_kib(), time.monotonic(), {}
try:
    response = session.get(url, stream=stream)
    size = sum(len(chunk) for chunk in response.iter_content(65536))
    answer = {"kind": "returned", "status": response.status_code, "bytes": size}
except BaseException as exc:
    answer = {"kind": type(exc).__name__, "message": str(exc)}
answer.update(seconds=time.monotonic() - started, grew_kib=hwm_kib() - before)
print(json.dumps(answer), flush=True)
"""


def _client(url: str, *, deadline_s: float, max_bytes: int, stream: bool = False, limit_s: float = 30) -> dict:
    """What a guarded session's GET of `url` did in a child process killed after `limit_s` seconds."""
    try:
        done = subprocess.run([sys.executable, "-c", _CHILD, url, str(deadline_s), str(max_bytes),
                               "stream" if stream else "whole"], cwd=REPO, capture_output=True, text=True,
                              timeout=limit_s, check=False)
    except subprocess.TimeoutExpired:
        return {"kind": "still running", "seconds": limit_s}
    assert done.stdout.strip(), done.stderr[-2000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


@contextlib.contextmanager
def raw_server(answer: Callable[[socket.socket, bytes], None]) -> Iterator[str]:
    """A loopback HTTP server written on bare sockets: `answer(connection, request)` for each request."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def handle(conn: socket.socket) -> None:
        with contextlib.suppress(OSError), conn:
            while not stop.is_set():
                request = conn.recv(65536)
                if not request:
                    return
                answer(conn, request)

    def serve() -> None:
        with contextlib.suppress(OSError):
            while not stop.is_set():
                conn, _ = listener.accept()
                threading.Thread(target=handle, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        listener.close()


def _gzip_of_zeros(mib: int) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = b"\0" * (1 << 20)
    return b"".join(packer.compress(zeros) for _ in range(mib)) + packer.flush()


def test_a_redirect_whose_own_body_is_a_gzip_bomb_is_refused_at_the_cap() -> None:
    """A same-origin 302 carrying ~100 KB of gzip that inflates to 100 MiB: requests reads a redirect's body before
    following it, so that body too must go through the gate — refused at the 1 MiB cap, the child's peak memory
    growing by a few MiB, not by the inflated size (it grew by ~200 MiB and answered 200 before)."""
    bomb = _gzip_of_zeros(100)

    def answer(conn: socket.socket, request: bytes) -> None:
        if request.startswith(b"GET /start "):
            conn.sendall(b"HTTP/1.1 302 Found\r\nLocation: /final\r\nContent-Encoding: gzip\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (len(bomb), bomb))
        else:
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")

    with raw_server(answer) as url:
        outcome = _client(url + "/start", deadline_s=20, max_bytes=1 << 20)
    assert outcome["kind"] == "AnswerTooLarge", outcome
    assert outcome["message"] == "the server: the answer is larger than 1048576 bytes"
    assert outcome["grew_kib"] < 32 << 10, outcome


def test_a_redirect_within_the_origin_is_still_followed() -> None:
    def answer(conn: socket.socket, request: bytes) -> None:
        if request.startswith(b"GET /start "):
            conn.sendall(b"HTTP/1.1 301 Moved\r\nLocation: /final\r\nContent-Length: 5\r\n\r\nmoved")
        else:
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")

    with raw_server(answer) as url:
        outcome = _client(url + "/start", deadline_s=5, max_bytes=1 << 20)
    assert (outcome["kind"], outcome.get("status"), outcome.get("bytes")) == ("returned", 200, 2), outcome


def _trickle_without_length(conn: socket.socket, _request: bytes) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n")
    for _ in range(300):
        conn.sendall(b"x")
        time.sleep(0.1)
    conn.close()


def test_a_body_without_a_length_cut_by_the_deadline_is_not_returned_as_whole() -> None:
    """No Content-Length, one byte each 0.1 s: at the deadline the watchdog shuts the socket and the body just
    ends; that is DeadlineExceeded, not a 200 holding what had arrived (as it was before)."""
    with raw_server(_trickle_without_length) as url:
        outcome = _client(url + "/", deadline_s=1.5, max_bytes=1 << 20)
    assert outcome["kind"] == "DeadlineExceeded", outcome
    assert outcome["message"] == "a request to the server took longer than 1.5 s"
    assert outcome["seconds"] < 4


def _empty_deflate_blocks(pause: float) -> Callable[[socket.socket, bytes], None]:
    """A gzip body of empty stored blocks for ever: it inflates to nothing, so no decoded byte ever comes out."""

    def answer(conn: socket.socket, _request: bytes) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nConnection: close\r\n\r\n"
                     b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff")
        while True:
            conn.sendall(b"\x00\x00\x00\xff\xff" * (1 if pause else 2000))
            time.sleep(pause)

    return answer


def test_a_streamed_gzip_body_that_inflates_to_nothing_ends_at_the_deadline() -> None:
    """Five bytes each 10 ms of empty deflate blocks, streamed: the deadline is checked on every socket read, not
    only when inflated bytes come out (it was still reading after 20 s with a 2 s deadline)."""
    with raw_server(_empty_deflate_blocks(0.01)) as url:
        outcome = _client(url + "/", deadline_s=2, max_bytes=1 << 20, stream=True, limit_s=20)
    assert outcome["kind"] == "DeadlineExceeded", outcome
    assert outcome["seconds"] < 5


def test_the_compressed_bytes_count_against_the_cap_too() -> None:
    """The same endless nothing sent as fast as it is read: the bytes on the wire are capped as well, so it is
    refused long before its (generous) deadline."""
    with raw_server(_empty_deflate_blocks(0.0)) as url:
        outcome = _client(url + "/", deadline_s=60, max_bytes=1 << 20, stream=True, limit_s=30)
    assert outcome["kind"] == "AnswerTooLarge", outcome
    assert outcome["message"].startswith("the server: the answer is larger than 1048576 bytes"), outcome
    assert outcome["seconds"] < 15


def test_one_deadline_covers_every_hop_of_a_redirect() -> None:
    """The hop after a redirect is sent by requests from inside the first: it runs under the first's deadline and
    watchdog (not a fresh deadline per hop), so a trickle after a redirect ends at the request's 1.5 s."""

    def answer(conn: socket.socket, request: bytes) -> None:
        if request.startswith(b"GET /start "):
            conn.sendall(b"HTTP/1.1 302 Found\r\nLocation: /slow\r\nContent-Length: 0\r\n\r\n")
            time.sleep(1.2)  # most of the deadline spent before the next hop begins
        else:
            _trickle_without_length(conn, request)

    with raw_server(answer) as url:
        outcome = _client(url + "/start", deadline_s=1.5, max_bytes=1 << 20)
    assert outcome["kind"] == "DeadlineExceeded", outcome
    assert outcome["seconds"] < 2.4  # a fresh deadline for the second hop would end it at 2.7 s


def test_a_redirect_loop_stops_after_five() -> None:
    def answer(conn: socket.socket, _request: bytes) -> None:
        conn.sendall(b"HTTP/1.1 302 Found\r\nLocation: /again\r\nContent-Length: 0\r\n\r\n")

    with raw_server(answer) as url:
        outcome = _client(url + "/start", deadline_s=10, max_bytes=1 << 20)
    assert outcome["kind"] == "TooManyRedirects", outcome
    assert outcome["seconds"] < 5


def test_a_streamed_answer_has_no_way_around_the_gate() -> None:
    """A caller of a streamed answer reads it with read, read1 or stream — all capped — and urllib3's own ways to
    the whole body (`data`, its chunked reader, its file object) are refused, not handed through (they were)."""
    bomb = _gzip_of_zeros(20)

    def answer(conn: socket.socket, _request: bytes) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n%s" % (len(bomb), bomb))

    with raw_server(answer) as url, guarded_session(deadline_s=10, max_bytes=1 << 20) as session:
        response = session.get(url + "/", stream=True, timeout=5)
        for name in ("data", "read_chunked", "_fp"):
            with pytest.raises(NetRefused) as caught:
                getattr(response.raw, name)
            assert str(caught.value) == (f"the server: the answer's body is read through the gate (read, read1, "
                                         f"stream), not urllib3's {name}")
        assert 0 < len(response.raw.read1(1000)) <= 1000
        with pytest.raises(AnswerTooLarge):
            while response.raw.read1(65536):
                pass


def _encoded(encoding: bytes, body: bytes) -> Callable[[socket.socket, bytes], None]:
    def answer(conn: socket.socket, _request: bytes) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Encoding: %s\r\nContent-Length: %d\r\n\r\n%s"
                     % (encoding, len(body), body))

    return answer


def _get(answer: Callable[[socket.socket, bytes], None]) -> bytes:
    with raw_server(answer) as url, guarded_session(deadline_s=5, max_bytes=1 << 20) as session:
        return bytes(session.get(url + "/", timeout=5).content)


_TEXT = b"hello world " * 100


@pytest.mark.parametrize(("encoding", "body", "problem"), [
    (b"gzip", b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff", "the answer's compressed body is corrupt "
                                                                     "(Error -3 while decompressing data: invalid "
                                                                     "block type)"),
    (b"gzip", gzip.compress(_TEXT)[:30], "the answer's compressed body ends before its end (cut short)"),
    (b"gzip", gzip.compress(_TEXT) + b"not gzip", "the answer's compressed body is corrupt (Error -3 while "
                                                  "decompressing data: incorrect header check)"),
], ids=["corrupt", "cut short", "garbage after it"])
def test_a_broken_compressed_body_is_refused_in_one_line(encoding: bytes, body: bytes, problem: str) -> None:
    """A corrupt gzip body raised zlib.error (not the gate's NetRefused, not an OSError its callers catch), and a
    body cut inside its gzip stream was returned as the whole answer (what had inflated so far)."""
    with pytest.raises(NetRefused) as caught:
        _get(_encoded(encoding, body))
    assert str(caught.value) == f"the server: {problem}"


@pytest.mark.parametrize(("encoding", "body"), [
    (b"gzip", gzip.compress(_TEXT[:500]) + gzip.compress(_TEXT[500:])),
    (b"deflate", zlib.compress(_TEXT)),
    (b"deflate", zlib.compress(_TEXT)[2:-4]),
    (b"gzip", b""),
], ids=["two gzip members", "zlib deflate", "raw deflate", "empty"])
def test_every_compressed_body_http_allows_is_inflated_whole(encoding: bytes, body: bytes) -> None:
    assert _get(_encoded(encoding, body)) == (_TEXT if body else b"")
