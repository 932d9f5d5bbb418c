"""A remote server's metadata and answers are believed only within bounds (issue 36), against the protocol mock
lying on loopback (tests/remote_mocks.py): a declared input far larger than the picture refused before anything
is sent; every output checked against the server's own metadata (dtype, shape, finiteness) before anything is
made of it; each answer within a size cap (declared before reading, and received); `--timeout` a deadline for the
whole request, so a server trickling its answer a byte at a time cannot outlive it."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest
from remote_mocks import MockServer

from app.errors import InferenceError
from app.inference.image.pipeline import run_image
from app.inference.remote.session import RemoteError, RemoteTarget, open_remote_session

REPO = Path(__file__).resolve().parents[3]
NUCLEI = REPO / "models" / "nuclei.onnx"
FACES = ["http", "grpc"]


def _target(server: MockServer, face: str, **kwargs) -> RemoteTarget:
    url = server.http_url if face == "http" else server.grpc_url
    return RemoteTarget(url, "nuclei", **{"timeout_s": 10.0, "backoff_s": 0.01, "retries": 0, **kwargs})


def _bounded(call, seconds: float):
    """`call()` on a thread, waited for at most `seconds`: (finished, its result or exception, elapsed)."""
    outcome: list = []

    def run() -> None:
        try:
            outcome.append(call())
        except BaseException as exc:  # the test looks at it
            outcome.append(exc)

    started = time.monotonic()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    return (not thread.is_alive()), (outcome[0] if outcome else None), time.monotonic() - started


# --- 1. a declared input bounded by the picture -------------------------------------------------------------


@pytest.mark.parametrize("face", FACES)
def test_a_declared_16384_square_input_is_refused_in_one_line_before_anything_is_sent(face):
    with MockServer(NUCLEI, name="nuclei") as server:
        server.state.metadata["inputs"][0]["shape"] = [1, 1, 16384, 16384]  # 1 GiB of FP32 per picture
        with pytest.raises(RemoteError) as caught:
            open_remote_session(_target(server, face))  # the warm-up would upload it
        assert server.state.requests == 0
    port = (server.http_url if face == "http" else server.grpc_url).rsplit(":", 1)[1]
    assert str(caught.value) == (f"remote 127.0.0.1:{port}/nuclei: the server declares an input of 1×1×16384×16384 "
                                 "(268435456 values, more than the 67108864 SegLens uploads for one picture); refused")
    assert caught.value.kind == "answer"


@pytest.mark.parametrize("face", FACES)
def test_a_declared_input_far_larger_than_the_picture_is_refused_per_picture_before_it_is_sent(face):
    from app.inference.image.pipeline import check_declared_size

    with MockServer(NUCLEI, name="nuclei") as server:
        server.state.metadata["inputs"][0]["shape"] = [1, 1, 6000, 6000]  # under the ceiling, 137× a 512² picture
        remote = open_remote_session(_target(server, face), warm_up=False)
        assert remote.spec.input.size == (6000, 6000)
        with pytest.raises(InferenceError) as caught:
            run_image(remote, np.zeros((512, 512), np.uint8))
        assert server.state.requests == 0
        check_declared_size(remote.spec, (3000, 3000))  # a picture of its size's order: no refusal
    assert str(caught.value) == (f"{remote.spec.path}: the server declares an input of 1×6000×6000 (36000000 values) "
                                 "for a picture of 512×512; refused")


# --- 2. every output checked against the server's own metadata ----------------------------------------------


def _as_float16(outputs):
    return [o.astype(np.float16) for o in outputs]


def _two_channels(outputs):
    return [np.concatenate([o, o], axis=1) for o in outputs]


def _one_nan(outputs):
    bad = outputs[0].copy()
    bad[0, 0, 3, 4] = np.nan
    return [bad]


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize(("tamper", "said"), [
    (_as_float16, "output 'probability' is float16; declared float32"),
    (_two_channels, "output 'probability' has shape 1×2×256×256; declared ?×1×256×256"),
    (_one_nan, "output 'probability' is not finite (1 NaN of 65536 values); no result is made from it"),
])
def test_an_answer_unlike_the_servers_own_metadata_is_refused_in_one_line_not_used(face, tamper, said):
    with MockServer(NUCLEI, name="nuclei") as server:
        remote = open_remote_session(_target(server, face, retries=2), sidecar=NUCLEI.with_suffix(".yaml"))
        good = remote.run(remote.warmup_tensor())
        assert good.shape == (1, 1, 256, 256)
        server.state.tamper, server.state.requests = tamper, 0
        with pytest.raises(RemoteError) as caught:
            run_image(remote, np.full((256, 256), 128, np.uint8))
        assert server.state.requests == 1  # a lying answer is not retried: it would lie again
    assert str(caught.value) == f"{remote.target.where}: {said}"
    assert caught.value.kind == "answer"


# --- 3. an answer-size cap ----------------------------------------------------------------------------------


@pytest.mark.parametrize("face", FACES)
def test_an_answer_over_the_cap_is_refused_in_one_line_and_not_retried(face):
    with MockServer(NUCLEI, name="nuclei") as server:
        remote = open_remote_session(_target(server, face, retries=2, max_answer_bytes=100_000), warm_up=False)
        with pytest.raises(RemoteError) as caught:
            remote.run(remote.warmup_tensor())  # a 256² FP32 map is 262,144 bytes
        assert server.state.requests == 1
    line = str(caught.value)
    assert "\n" not in line and caught.value.kind == "answer"
    if face == "http":  # refused on its Content-Length, before the body is read
        assert line.startswith(f"{remote.target.where}: the answer declares ")
        assert line.endswith(" bytes; the limit is 100000")
    else:  # gRPC refuses a message declaring more than the channel's receive limit
        assert line.startswith(f"{remote.target.where}: the answer is larger than the limit (gRPC RESOURCE_EXHAUSTED")


def test_an_answer_without_a_length_is_counted_as_it_arrives_and_refused_past_the_cap():
    with MockServer(NUCLEI, name="nuclei") as server:
        remote = open_remote_session(_target(server, "http", max_answer_bytes=100_000), warm_up=False)
        server.state.no_length = True  # 262 kB, its end the connection's close: nothing declared to check first
        with pytest.raises(RemoteError) as caught:
            remote.run(remote.warmup_tensor())
    assert str(caught.value) == f"{remote.target.where}: the answer is larger than 100000 bytes"


def test_an_answer_declaring_50_gb_is_refused_at_once_not_read():
    with MockServer(NUCLEI, name="nuclei") as server:
        remote = open_remote_session(_target(server, "http"), warm_up=False)
        server.state.declare_length = 50_000_000_000  # then sends 10 bytes and stalls
        finished, outcome, elapsed = _bounded(lambda: remote.run(remote.warmup_tensor()), 8.0)
    assert finished and elapsed < 5.0
    assert isinstance(outcome, RemoteError)
    assert str(outcome) == (f"{remote.target.where}: the answer declares 50000000000 bytes; the limit is "
                            f"{1 << 30}")


# --- 4. a deadline per request, not per read ----------------------------------------------------------------


def test_a_trickling_answer_cannot_outlive_the_timeout_and_the_session_goes_on():
    # over HTTP tritonclient's timeout is per read; gRPC's is a deadline of the call (test_remote's hung server)
    face = "http"
    with MockServer(NUCLEI, name="nuclei") as server:
        remote = open_remote_session(_target(server, face, timeout_s=1.5), sidecar=NUCLEI.with_suffix(".yaml"))
        tensor = remote.warmup_tensor()
        want = remote.run(tensor)
        server.state.trickle_s = 0.05  # a byte every 50 ms: each read well within 1.5 s, the whole answer hours
        finished, outcome, elapsed = _bounded(lambda: remote.run(tensor), 10.0)
        assert finished, "the trickling answer outlived the timeout"
        assert isinstance(outcome, RemoteError) and outcome.kind == "timeout"
        assert 1.4 < elapsed < 4.0
        assert str(outcome) == f"{remote.target.where}: no answer within 1.5 s"
        server.state.trickle_s = None  # the next request is answered on a fresh connection
        assert np.array_equal(remote.run(tensor), want)


# --- the same class elsewhere: what else the server says of itself ------------------------------------------


def test_a_declared_size_overflowing_64_bits_is_refused_at_open_not_wrapped_to_nothing():
    with MockServer(NUCLEI, name="nuclei") as server:
        server.state.metadata["inputs"][0]["shape"] = [1, 1, 2**32, 2**32]  # int64's product wraps to 0
        with pytest.raises(RemoteError, match=r"the server declares an input of 1×1×4294967296×4294967296 "):
            open_remote_session(_target(server, "grpc"))
        assert server.state.requests == 0


def test_the_servers_words_about_itself_are_bounded_before_they_are_shown():
    with MockServer(NUCLEI, name="nuclei", device="CPU") as server:
        remote = open_remote_session(_target(server, "http"), warm_up=False)
        remote.run(remote.warmup_tensor())
        assert remote.info.provider_label.endswith("(onnxruntime_onnx, CPU)")
        server.state.device = "GPU\n\x1b[31mforged line"  # a control character: not shown
        remote.run(remote.warmup_tensor())
        assert remote.info.provider_label.endswith("(onnxruntime_onnx, CPU)")
        for said in (10**400, float("nan"), float("inf"), -5, True, "12"):  # no number of µs: unknown
            remote._timed(10.0, {"compute_us": said})
            assert remote.last_timing.compute_ms is None and remote.last_timing.network_ms == 10.0


@pytest.mark.skipif(not hasattr(__import__("os"), "mkfifo"), reason="named pipes")
def test_a_fifo_given_as_the_ca_file_is_one_line_at_once(tmp_path):
    import os

    fifo = tmp_path / "ca.pem"
    os.mkfifo(fifo)
    started = time.monotonic()
    with pytest.raises(RemoteError) as caught:
        open_remote_session(RemoteTarget("https://127.0.0.1:9", "nuclei", ca_file=fifo, retries=0))
    assert time.monotonic() - started < 2.0
    assert str(caught.value) == (f"remote 127.0.0.1:9/nuclei: the CA file {fifo} is not a readable file (a PEM "
                                 "bundle): not a regular file: a named pipe (FIFO)")
