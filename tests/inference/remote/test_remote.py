"""Remote sessions against the Open Inference Protocol mock (tests/remote_mocks.py, written from the published
schema): the same masks as a local CPU session over HTTP binary and gRPC, the same spec where the wire can tell,
and each failure one line (auth never retried, 503 retried then said, a hung server timed out)."""

from __future__ import annotations

import subprocess
import sys
import threading
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from remote_mocks import MockServer

from app.inference.describe.info import spec_dict
from app.inference.image.pipeline import run_image
from app.inference.model.builder import load_spec
from app.inference.remote.session import RemoteError, RemoteTarget, open_remote_session
from app.inference.runtime.session import open_session

REPO = Path(__file__).resolve().parents[3]
NUCLEI, ANOMALY = REPO / "models" / "nuclei.onnx", REPO / "models" / "surface_anomaly.onnx"


@pytest.fixture(scope="module")
def nuclei_server():
    with MockServer(NUCLEI, name="nuclei", token="s3cret", device="CPU") as server:
        yield server


def _image(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


def _target(url: str, **kwargs) -> RemoteTarget:
    return RemoteTarget(url, kwargs.pop("model", "nuclei"), token=kwargs.pop("token", "s3cret"),
                        **{"timeout_s": 10.0, "backoff_s": 0.01, **kwargs})


@pytest.mark.parametrize("face", ["http", "grpc"])
def test_masks_are_byte_identical_to_a_local_cpu_run(nuclei_server, face):
    local = open_session(load_spec(NUCLEI), "cpu")
    url = nuclei_server.http_url if face == "http" else nuclei_server.grpc_url
    remote = open_remote_session(_target(url), sidecar=NUCLEI.with_suffix(".yaml"))
    for seed in range(3):
        image = _image((300, 280), seed)
        want, got = run_image(local, image), run_image(remote, image)
        assert got.mask is not None and np.array_equal(got.mask, want.mask)
        assert got.scores is not None and np.array_equal(got.scores, want.scores)
    assert remote.info.provider_label == f"remote: 127.0.0.1:{url.rsplit(':', 1)[1]}/nuclei (onnxruntime_onnx, CPU)"
    assert remote.info.on_gpu is False
    assert remote.last_timing is not None and remote.last_timing.compute_ms is not None
    assert remote.timing_line().startswith("latency per request: network+queue ")


@pytest.mark.parametrize("face", ["http", "grpc"])
def test_an_anomaly_model_returns_its_outputs_in_the_spec_order(face):
    spec = load_spec(ANOMALY)
    local = open_session(spec, "cpu")
    with MockServer(ANOMALY, name="surface_anomaly") as server:
        url = server.http_url if face == "http" else server.grpc_url
        remote = open_remote_session(_target(url, model="surface_anomaly", token=None),
                                     sidecar=ANOMALY.with_suffix(".yaml"))
        tensor = local.warmup_tensor() + 0.5
        want, got = local.run(tensor), remote.run(tensor)
        assert isinstance(got, tuple) and len(got) == len(want) == len(spec.output.fetched)
        for a, b in zip(want, got, strict=True):
            assert a.dtype == b.dtype and np.array_equal(a, b)
        image = _image((288, 512, 3))
        assert run_image(remote, image).image_score == run_image(local, image).image_score


def test_the_spec_over_the_wire_is_the_files_where_the_wire_can_tell(nuclei_server):
    sidecar = NUCLEI.with_suffix(".yaml")
    remote = open_remote_session(_target(nuclei_server.grpc_url), sidecar=sidecar, warm_up=False)
    here = spec_dict(load_spec(NUCLEI, sidecar), None)
    there = spec_dict(remote.spec, None)
    # not over the wire: the file's path, its producer, opset and metadata, symbolic dimension names (-1 there)
    for key in ("model", "producer", "opset", "metadata", "inputs", "outputs"):
        here.pop(key, None), there.pop(key, None)
    assert there == here
    assert str(remote.spec.path) == f"remote {remote.target.host}/nuclei" and remote.spec.path.name == "nuclei"
    assert [t.describe() for t in remote.spec.inputs] == ["input[?,1,256,256] float32"]


def test_without_a_sidecar_the_assumed_activation_is_said_in_one_line(nuclei_server):
    remote = open_remote_session(_target(nuclei_server.http_url), warm_up=False)
    assert remote.spec.output.kind == "binary" and remote.spec.output.activation == "sigmoid"
    notes = remote.info.notes
    assert len(notes) == 1 and "does not say whether the model ends in its activation" in notes[0]
    assert "\n" not in notes[0]


@pytest.mark.parametrize("face", ["http", "grpc"])
@pytest.mark.parametrize("token", [None, "wrong"])
def test_no_token_or_a_wrong_one_is_one_line_never_retried(nuclei_server, face, token):
    url = nuclei_server.http_url if face == "http" else nuclei_server.grpc_url
    retries: list[str] = []
    with pytest.raises(RemoteError) as caught:
        open_remote_session(_target(url, token=token), on_retry=retries.append)
    line = str(caught.value)
    assert line.startswith(f"remote 127.0.0.1:{url.rsplit(':', 1)[1]}/nuclei: refused: not authorised (")
    assert "401" in line if face == "http" else "UNAUTHENTICATED" in line
    assert "\n" not in line and retries == [] and "s3cret" not in line
    assert caught.value.kind == "auth" and "--" not in line  # the CLI adds its options, the viewer its dialog


@pytest.mark.parametrize("face", ["http", "grpc"])
def test_an_unknown_model_is_one_line(nuclei_server, face):
    url = nuclei_server.http_url if face == "http" else nuclei_server.grpc_url
    with pytest.raises(RemoteError, match=r"/nope: no such model on the server \((HTTP 404|gRPC NOT_FOUND)"):
        open_remote_session(_target(url, model="nope"))


@pytest.mark.parametrize("face", ["http", "grpc"])
def test_a_busy_server_is_retried_with_backoff_then_said(face):
    with MockServer(NUCLEI, name="nuclei") as server:
        url = server.http_url if face == "http" else server.grpc_url
        retries: list[str] = []
        remote = open_remote_session(_target(url, token=None, retries=2), warm_up=False, on_retry=retries.append)
        tensor = remote.warmup_tensor()
        server.state.busy = 1  # one 503, then an answer: the run goes on
        assert remote.run(tensor).shape == (1, 1, 256, 256)
        assert len(retries) == 1 and retries[0].endswith("retrying in 0.01 s (attempt 2 of 3)")
        server.state.busy, server.state.requests = 10, 0
        with pytest.raises(RemoteError) as caught:
            remote.run(tensor)
        assert server.state.requests == 3 and len(retries) == 3  # bounded: 1 + 2 retries
        what = "HTTP 503" if face == "http" else "gRPC UNAVAILABLE"
        assert f"/nuclei: the server is unavailable or the model not ready ({what}: " in str(caught.value)
        assert str(caught.value).endswith("(tried 3 times)")


@pytest.mark.parametrize("face", ["http", "grpc"])
def test_a_hung_server_times_out_in_one_line(face):
    with MockServer(NUCLEI, name="nuclei") as server:
        url = server.http_url if face == "http" else server.grpc_url
        remote = open_remote_session(_target(url, token=None, retries=0, timeout_s=0.5), warm_up=False)
        server.state.hang = True
        with pytest.raises(RemoteError) as caught:
            remote.run(remote.warmup_tensor())
        line = str(caught.value)
        assert "\n" not in line
        assert caught.value.kind == "timeout"
        assert ("no answer within 0.5 s" in line if face == "http"
                else "no answer within the timeout (gRPC DEADLINE_EXCEEDED" in line)


@pytest.mark.parametrize("face", ["http", "grpc"])
def test_a_stopped_server_is_unreachable_in_one_line_after_the_retries(face):
    server = MockServer(NUCLEI, name="nuclei").__enter__()
    url = server.http_url if face == "http" else server.grpc_url
    remote = open_remote_session(_target(url, token=None, retries=1, timeout_s=3.0), warm_up=False)
    server.stop()
    with pytest.raises(RemoteError) as caught:
        remote.run(remote.warmup_tensor())
    line = str(caught.value)
    assert "\n" not in line and line.endswith("(tried 2 times)")
    assert any(what in line for what in ("server unreachable", "closed the connection", "connection failed"))


@pytest.mark.parametrize("url, problem", [
    ("ftp://h:1", "expected grpc://, grpcs://, http:// or https://"),
    ("http://me:pw@h:8000", "credentials do not belong in the URL"),
    ("grpc://h:99999", "the port is not a number"),
    ("http://h:8000/v2/models/x", "a URL path is not used"),
    ("grpc://:8001", "no host"),
])
def test_a_bad_server_url_is_one_line(url, problem):
    with pytest.raises(RemoteError, match=problem) as caught:
        RemoteTarget(url, "nuclei")
    assert "pw" not in str(caught.value).replace("--password-env", "")


def test_targets_say_host_and_port_and_keep_secrets_out_of_their_repr():
    target = RemoteTarget("grpcs://gpu-box", "nuclei", token="t0ken", username="u", password="pw")
    assert (target.host, target.protocol, target.tls, target.where) == ("gpu-box:8001", "grpc", True,
                                                                        "remote gpu-box:8001/nuclei")
    assert "t0ken" not in repr(target) and "pw" not in repr(target) and "t0ken" not in repr(target.wire())
    assert target.wire().headers() == {"authorization": "Bearer t0ken"}
    basic = replace(target, token=None).wire().headers()
    assert basic == {"authorization": "Basic dTpwdw=="}
    assert RemoteTarget("http://[::1]:9000", "m").host == "[::1]:9000"


def test_tritonclient_is_not_loaded_by_importing_the_remote_session():
    code = ("import sys, app.inference.remote.session, app.inference.runtime.session, app.cli; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('tritonclient', 'gevent', 'grpc')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("face", ["http", "grpc"])
def test_a_server_without_compute_us_splits_the_latency_from_its_statistics(face):
    with MockServer(NUCLEI, name="nuclei") as server:
        server.state.compute_us = False  # a stock Triton: only the statistics extension says the compute
        url = server.http_url if face == "http" else server.grpc_url
        remote = open_remote_session(_target(url, token=None))
        assert remote.last_timing is None or remote.last_timing.compute_ms is None
        assert remote.timing_line() is None  # the warm-up is not the run's
        for _ in range(3):
            remote.run(remote.warmup_tensor())
        assert remote.last_timing.compute_ms is None
        line = remote.timing_line()
        assert line.startswith("latency per request: network+queue ")
        assert "server compute " in line and "(the server's statistics) (mean of 3)" in line
        assert "not reported" not in line


def test_a_long_run_keeps_its_latency_sums_not_every_record(nuclei_server):
    from app.inference.remote.session import MAX_TIMINGS

    remote = open_remote_session(_target(nuclei_server.grpc_url), warm_up=False)
    for _ in range(MAX_TIMINGS + 1):
        remote._timed(10.0, {"compute_us": 4000})  # what each answer records: 10 ms round trip, 4 ms compute
    assert len(remote.timings) <= MAX_TIMINGS
    assert remote.timing_line() == ("latency per request: network+queue 6.0 ms, server compute 4.0 ms "
                                    f"(mean of {MAX_TIMINGS + 1})")


def test_info_says_the_servers_fallback_once():
    from app.inference.describe.info import session_lines
    from app.inference.model.session import RemoteInfo, SessionInfo

    def lines(device: str, fallback: str | None) -> list[str]:
        remote = RemoteInfo("gpu-box:8001", "nuclei", "", "onnxruntime_onnx", device, fallback)
        return session_lines(SessionInfo("remote", remote.label, (remote.label,), remote=remote))

    quiet = lines("CPU (no NVIDIA GPU)", "no NVIDIA GPU")  # serve on `auto` without a GPU: its label says it
    assert quiet[0] == ("provider      remote: gpu-box:8001/nuclei (onnxruntime_onnx, CPU (no NVIDIA GPU)) "
                        "(requested remote, over grpc)") and not any("not on GPU" in line for line in quiet)
    said = lines("CPU", "CUDA failed: libcudnn.so.9 missing")
    assert "not on GPU    the server's session: CUDA failed: libcudnn.so.9 missing" in said


def test_http_requests_from_other_threads_reuse_their_clients(nuclei_server):
    from concurrent.futures import ThreadPoolExecutor

    from app.inference.remote.calls import MAX_SENDERS

    before = set(threading.enumerate())
    remote = open_remote_session(_target(nuclei_server.http_url), sidecar=NUCLEI.with_suffix(".yaml"))
    tensor = remote.warmup_tensor()
    want = remote.run(tensor)
    for _ in range(10):  # ten folder runs, each with its own two helper threads (gevent's clients are per thread)
        with ThreadPoolExecutor(2) as pool:
            assert all(np.array_equal(got, want) for got in pool.map(lambda _: remote.run(tensor), range(4)))
    senders = [t for t in set(threading.enumerate()) - before if t.name.startswith("remote-http-")]
    assert 0 < len(senders) <= MAX_SENDERS  # bounded by the session's sender threads, not one per thread made
    remote.close()
    with pytest.raises(RemoteError):  # closed: its clients are gone
        remote.run(tensor)


def test_a_keep_alive_connection_the_server_closed_is_retried_not_failed():
    with MockServer(NUCLEI, name="nuclei") as server:
        retries: list[str] = []
        remote = open_remote_session(_target(server.http_url, token=None), sidecar=NUCLEI.with_suffix(".yaml"),
                                     on_retry=retries.append)
        server.state.drop = True  # each answer's connection closed behind it
        tensor = remote.warmup_tensor()
        first = remote.run(tensor)
        for _ in range(3):
            assert np.array_equal(remote.run(tensor), first)
        # whether the client meets the closed connection (and retries) or sees it closed first (and reconnects)
        # depends on when the server's FIN arrives: either way no request failed, and any retry was for that
        assert all("/nuclei: the server closed the connection — retrying in" in line for line in retries)


@pytest.mark.parametrize("url", ["http://gpu-box:8000", "grpc://10.0.0.5:8001", "http://192.168.1.20"])
def test_credentials_in_clear_text_to_another_host_are_refused_unless_allowed(url, caplog):
    for secrets in ({"token": "t0ken"}, {"username": "u", "password": "pw"}):
        with pytest.raises(RemoteError) as caught:
            RemoteTarget(url, "nuclei", **secrets)
        line = str(caught.value)
        host = url.split("//")[1].split(":")[0]
        assert line == (f"server URL {url!r}: credentials would travel in clear text to {host} "
                        f"({url.split(':')[0]}://): use https, or set --allow-insecure to accept that risk")
        assert caught.value.kind == "url" and "t0ken" not in line and "pw" not in line
        with caplog.at_level("WARNING"):
            RemoteTarget(url, "nuclei", allow_insecure=True, **secrets)  # the user's named opt-in: warned
        assert f"credentials sent in clear text to {host} (--allow-insecure is set)" in caplog.text
    RemoteTarget(url, "nuclei")  # no credentials: nothing to protect


@pytest.mark.parametrize("url", ["https://gpu-box", "grpcs://gpu-box:8001", "http://127.0.0.1:8000",
                                 "grpc://localhost:8001", "http://[::1]:8000"])
def test_credentials_over_tls_or_to_this_machine_are_sent(url):
    assert RemoteTarget(url, "nuclei", token="t0ken").wire().headers() == {"authorization": "Bearer t0ken"}


def test_the_cli_refuses_a_token_in_clear_text_to_another_host_in_one_line(capsys, monkeypatch):
    from app.cli import main

    monkeypatch.setenv("SEGLENS_REMOTE_TOKEN", "s3cret")
    argv = ["info", "nuclei", "--device", "remote", "--server", "http://gpu-box.invalid:8000", "--no-session"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("error: --server 'http://gpu-box.invalid:8000': credentials would travel in clear text to "
                   "gpu-box.invalid (http://): use https, or set --allow-insecure to accept that risk")


def test_a_served_models_spec_says_so_as_data_and_a_files_does_not(nuclei_server, tmp_path):
    from app.inference.model.spec import RemoteModel
    from app.inference.remote.graph import metadata_sha256
    from app.runs.outputs.provenance import _model_sha256
    from app.runs.outputs.segments import algorithm_of

    remote = open_remote_session(_target(nuclei_server.http_url), warm_up=False)
    spec, where = remote.spec, str(remote.spec.path)
    assert spec.remote == RemoteModel(where, metadata_sha256(spec.inputs, spec.outputs, where))
    assert remote.info.remote is not None and remote.info.remote.where == where
    assert remote.info.remote.connection == "over http"
    assert _model_sha256(spec) == spec.remote.sha256  # the run record's model hash: no file is read
    assert algorithm_of(spec.path, remote=True).name == "nuclei"
    local = load_spec(NUCLEI)
    assert local.remote is None and open_session(local, "cpu", warm_up=False).info.notes == ()
    # a local file whose name reads like a server's is a local file: the spec says so, not its name
    odd = tmp_path / "remote 127.0.0.1:8001"
    odd.mkdir()
    copied = odd / "nuclei.onnx"
    copied.write_bytes(NUCLEI.read_bytes())
    assert load_spec(copied).remote is None
    remote.close()
