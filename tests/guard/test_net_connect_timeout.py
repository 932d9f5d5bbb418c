"""app.guard.net_session.guarded_session: the caller's timeout bounds the connection too, not only each read — a host
that never completes the handshake is given up after the caller's timeout, not after the whole request's deadline
(which, for a series retrieve, is an hour). A real loopback listener whose accept queue is full (the kernel then
drops further SYNs, as a filtered port does)."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest
import requests

from app.guard.net import NetRefused
from app.guard.net_session import guarded_session

# a connect that times out, or (when the kernel lets the handshake through after all) a read that does
GAVE_UP = (requests.exceptions.Timeout, requests.exceptions.ConnectionError, NetRefused)


@pytest.fixture
def full_listener() -> Iterator[int]:
    """A loopback port that accepts no more connections: its backlog filled, nothing ever accepted."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    waiting = []
    for _ in range(8):  # until a connect no longer completes at once
        s = socket.socket()
        s.setblocking(False)
        if s.connect_ex(("127.0.0.1", port)) not in (0,):
            s.close()
            break
        waiting.append(s)
    try:
        probe = socket.socket()
        probe.settimeout(0.3)
        try:
            probe.connect(("127.0.0.1", port))
            pytest.skip("this kernel completes connections beyond a full backlog")
        except TimeoutError:
            pass
        finally:
            probe.close()
        yield port
    finally:
        for s in waiting:
            s.close()
        listener.close()


@pytest.mark.parametrize("timeout", [0.5, (0.5, 5.0)])
def test_the_callers_timeout_bounds_the_connection(full_listener, timeout):
    session = guarded_session(deadline_s=20, max_bytes=1000)
    started = time.monotonic()
    with pytest.raises(GAVE_UP):
        session.get(f"http://127.0.0.1:{full_listener}/", timeout=timeout)
    assert time.monotonic() - started < 5  # not the 20 s deadline


def test_without_a_timeout_the_deadline_bounds_the_connection(full_listener):
    session = guarded_session(deadline_s=1, max_bytes=1000)
    started = time.monotonic()
    with pytest.raises(GAVE_UP):
        session.get(f"http://127.0.0.1:{full_listener}/")
    assert time.monotonic() - started < 5
