"""RemoteSession.cancel(): a run() stuck on a server that took the request and never answers (the mock's hang
mode), or waiting out a backoff (busy mode), returns 'cancelled' at once on HTTP and gRPC; later runs too; close()
cancels. The request timeout and backoff are a minute here: a run that returns within the join's few seconds was
cut short by the cancel, not by either (no timing is asserted)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from remote_mocks import MockServer
from waiting import until

from app.inference.remote.session import RemoteError, RemoteSession, RemoteTarget, open_remote_session

NUCLEI = Path(__file__).resolve().parents[3] / "models" / "nuclei.onnx"


def _session(url: str, **kwargs) -> RemoteSession:
    target = RemoteTarget(url, "nuclei", **{"timeout_s": 60.0, "backoff_s": 60.0, "retries": 3, **kwargs})
    return open_remote_session(target, sidecar=NUCLEI.with_suffix(".yaml"))


def _run_in_thread(session: RemoteSession) -> tuple[threading.Thread, list[BaseException]]:
    tensor, raised = session.warmup_tensor(), []

    def run() -> None:
        try:
            session.run(tensor)
        except BaseException as exc:  # the test's to look at
            raised.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, raised


def _cancelled(raised: list[BaseException], thread: threading.Thread, where: str) -> None:
    thread.join(timeout=10)
    assert not thread.is_alive(), "run() still waiting after cancel()"
    assert len(raised) == 1 and isinstance(raised[0], RemoteError)
    assert str(raised[0]) == f"{where}: cancelled" and raised[0].kind == "cancelled"


@pytest.mark.parametrize("face", ["http", "grpc"])
def test_cancel_unblocks_a_request_the_server_never_answers_and_later_runs_fail_at_once(face):
    with MockServer(NUCLEI, name="nuclei") as server:
        session = _session(server.http_url if face == "http" else server.grpc_url)
        seen = server.state.requests
        server.state.hang = True
        thread, raised = _run_in_thread(session)
        until(lambda: server.state.requests > seen, what="the request at the server")
        session.cancel()
        _cancelled(raised, thread, session.target.where)
        session.cancel()  # idempotent
        later, raised_later = _run_in_thread(session)  # the server still hangs: this would wait a minute
        _cancelled(raised_later, later, session.target.where)
        assert server.state.requests == seen + 1  # nothing more was sent
        session.close()


@pytest.mark.parametrize("face", ["http", "grpc"])
def test_cancel_cuts_a_backoff_wait_short(face):
    with MockServer(NUCLEI, name="nuclei") as server:
        session = _session(server.http_url if face == "http" else server.grpc_url)
        retrying = threading.Event()
        session.on_retry = lambda _line: retrying.set()
        server.state.busy = 100  # 503 / UNAVAILABLE: retried after 60 s
        thread, raised = _run_in_thread(session)
        assert retrying.wait(10)
        session.cancel()
        _cancelled(raised, thread, session.target.where)
        session.close()


@pytest.mark.parametrize("face", ["http", "grpc"])
def test_close_cancels_a_request_in_flight(face):
    with MockServer(NUCLEI, name="nuclei") as server:
        session = _session(server.http_url if face == "http" else server.grpc_url)
        seen = server.state.requests
        server.state.hang = True
        thread, raised = _run_in_thread(session)
        until(lambda: server.state.requests > seen, what="the request at the server")
        session.close()
        _cancelled(raised, thread, session.target.where)
