"""An HTTP remote session used from several threads at once: tritonclient.http's client is gevent's and fails
with greenlet's "Cannot switch to a different thread" on any thread but the one that made it (seen once under
load: every row of a `run --server http://…` failed so). The session's calls all go through its own sender threads
(app.inference.remote.calls), so it does not matter which thread asks: the opener, helpers, a face's other thread
reading the latency split (the statistics extension), closing it."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from remote_mocks import MockServer

from app.inference.remote.session import RemoteError, RemoteTarget, open_remote_session

NUCLEI = Path(__file__).resolve().parents[3] / "models" / "nuclei.onnx"


def _on_another_thread(call):
    box: list = []
    thread = threading.Thread(target=lambda: box.append(call()))
    thread.start()
    thread.join(timeout=30)
    return box[0]


def test_the_opener_helpers_and_another_thread_share_one_http_session():
    with MockServer(NUCLEI, name="nuclei") as server:
        server.state.compute_us = False  # a stock Triton: compute only from the statistics extension
        remote = open_remote_session(RemoteTarget(server.http_url, "nuclei", timeout_s=10.0, retries=0),
                                     sidecar=NUCLEI.with_suffix(".yaml"))
        tensor = remote.warmup_tensor()
        want = remote.run(tensor)
        _on_another_thread(remote.start_timing)  # reads the server's statistics on a thread that made no client
        with ThreadPoolExecutor(4) as helpers:  # a folder run's in-flight helpers, while the opener asks too
            pending = [helpers.submit(remote.run, tensor) for _ in range(8)]
            assert np.array_equal(remote.run(tensor), want)
            assert all(np.array_equal(future.result(), want) for future in pending)
        line = _on_another_thread(remote.timing_line)
        assert "server compute" in line and "(the server's statistics) (mean of 9)" in line
        _on_another_thread(remote.close)  # closed from elsewhere: each client on its own thread, no error
        try:
            remote.run(tensor)
        except RemoteError as exc:
            assert str(exc).endswith("/nuclei: cancelled")
        else:
            raise AssertionError("a closed session ran")


def test_a_session_dropped_unclosed_lets_its_sender_threads_go():
    import gc

    with MockServer(NUCLEI, name="nuclei") as server:
        before = set(threading.enumerate())
        remote = open_remote_session(RemoteTarget(server.http_url, "nuclei", timeout_s=10.0, retries=0),
                                     sidecar=NUCLEI.with_suffix(".yaml"))
        senders = [t for t in set(threading.enumerate()) - before if t.name.startswith("remote-http-")]
        assert senders  # the metadata and the warm-up went through one
        del remote
        gc.collect()
        for thread in senders:
            thread.join(timeout=10)
        assert not any(thread.is_alive() for thread in senders)
