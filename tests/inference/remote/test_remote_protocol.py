"""The ModelSession protocol's members, exercised through the protocol on both implementations: a local ONNX
Runtime session and a remote one against the loopback Open Inference Protocol server (tests/remote_mocks.py),
each opened by the one opener (app.inference.remote.opener). The two answer the same tensor alike; where they
differ the protocol says how: in_flight, timings and the timing line, what cancel and close do to a later run."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from remote_mocks import MockServer

from app.errors import InferenceError
from app.inference.model.builder import load_spec
from app.inference.model.session import ModelSession, warmup_tensor
from app.inference.remote.opener import open_model_session
from app.inference.remote.session import RemoteError, RemoteSession, RemoteTarget
from app.inference.runtime.session import LocalSession

NUCLEI = Path(__file__).resolve().parents[3] / "models" / "nuclei.onnx"


@pytest.fixture(scope="module")
def nuclei_server():
    with MockServer(NUCLEI, name="nuclei", device="CPU") as server:
        yield server


def _remote(url: str) -> ModelSession:
    target = RemoteTarget(url, "nuclei", timeout_s=10.0, backoff_s=0.01)
    return open_model_session(target, sidecar=NUCLEI.with_suffix(".yaml"), warm_up=False)


def _warmed_and_run(session: ModelSession) -> np.ndarray:
    """warm_up, then run on the working shape: what every backend does alike."""
    info = session.warm_up(measure_warm=True)
    assert info is session.info and info.first_run_ms > 0 and info.warm_run_ms > 0
    output = session.run(warmup_tensor(session.spec) + 0.25)
    assert isinstance(output, np.ndarray)
    return output


def test_the_opener_gives_a_local_session_for_a_spec_and_a_remote_one_for_a_target(nuclei_server):
    local = open_model_session(load_spec(NUCLEI), device="cpu", warm_up=False)
    remote = _remote(nuclei_server.http_url)
    try:
        assert isinstance(local, LocalSession) and isinstance(remote, RemoteSession)
        assert local.info.remote is None and remote.info.remote is not None
        assert local.info.first_run_ms == remote.info.first_run_ms == 0  # warm_up=False: no run yet
    finally:
        local.close()
        remote.close()


@pytest.mark.parametrize("face", ["http", "grpc"])
def test_both_backends_answer_alike_through_the_protocol(nuclei_server, face):
    local = open_model_session(load_spec(NUCLEI), device="cpu", warm_up=False)
    remote = _remote(nuclei_server.http_url if face == "http" else nuclei_server.grpc_url)
    try:
        assert np.array_equal(_warmed_and_run(local), _warmed_and_run(remote))
    finally:
        local.close()
        remote.close()


def test_a_local_session_runs_one_at_a_time_keeps_no_request_timings_and_cancel_is_a_no_op():
    session: ModelSession = open_model_session(load_spec(NUCLEI), device="cpu", warm_up=False)
    _warmed_and_run(session)
    assert session.in_flight == 1
    assert list(session.timings) == [] and session.timing_line() is None  # its time is the stage timings
    session.cancel()
    session.run(warmup_tensor(session.spec))  # still answers: a local run is not cut short
    adjusted = replace(session.spec, output=replace(session.spec.output, threshold=0.7))  # a face's tuning
    session.spec = adjusted
    assert session.spec is adjusted
    session.run(warmup_tensor(session.spec))
    session.close()
    session.close()  # idempotent
    with pytest.raises(InferenceError, match="nuclei.onnx: the session was closed"):
        session.run(warmup_tensor(session.spec))


@pytest.mark.parametrize("face", ["http", "grpc"])
def test_a_remote_session_times_each_request_and_cancel_ends_its_runs(nuclei_server, face):
    session = _remote(nuclei_server.http_url if face == "http" else nuclei_server.grpc_url)
    try:
        assert session.in_flight > 1  # requests wait on the network: a folder run keeps several going
        before = len(session.timings)
        _warmed_and_run(session)
        assert len(session.timings) == before + 3  # two warm-up requests and the run
        assert all(t.network_ms >= 0 and t.compute_ms is not None for t in session.timings[before:])
        line = session.timing_line()
        assert line is not None and line.startswith("latency per request: network+queue ")
        session.cancel()
        with pytest.raises(RemoteError, match="cancelled$") as raised:
            session.run(warmup_tensor(session.spec))
        assert raised.value.kind == "cancelled"
    finally:
        session.close()
        session.close()  # idempotent
