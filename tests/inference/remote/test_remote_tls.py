"""Remote sessions over TLS (https://, grpcs://) against the protocol mock with a self-signed certificate: trusted
through --ca-file it answers; not trusted, the refusal is one line naming the certificate, never retried."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from remote_mocks import MockServer, self_signed

from app.inference.model.builder import load_spec
from app.inference.remote.session import RemoteError, RemoteTarget, open_remote_session
from app.inference.runtime.session import open_session

NUCLEI = Path(__file__).resolve().parents[3] / "models" / "nuclei.onnx"


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory):
    cert, key = self_signed(tmp_path_factory.mktemp("tls"))
    with MockServer(NUCLEI, name="nuclei", token="s3cret", tls=(cert, key)) as server:
        yield server, cert


@pytest.mark.parametrize("face", ["https", "grpcs"])
def test_a_server_trusted_through_its_ca_answers_the_same_tensor(tls_server, face):
    server, cert = tls_server
    url = server.http_url if face == "https" else server.grpc_url
    assert url.startswith(face + "://")
    remote = open_remote_session(RemoteTarget(url, "nuclei", token="s3cret", ca_file=cert, timeout_s=10),
                                 sidecar=NUCLEI.with_suffix(".yaml"))
    local = open_session(load_spec(NUCLEI), "cpu")
    tensor = np.random.default_rng(1).random((1, 1, 256, 256), dtype=np.float32)
    assert np.array_equal(remote.run(tensor), local.run(tensor))


@pytest.mark.parametrize("face", ["https", "grpcs"])
def test_a_certificate_not_trusted_is_one_line_never_retried(tls_server, face):
    server, _cert = tls_server
    url = server.http_url if face == "https" else server.grpc_url
    retries: list[str] = []
    with pytest.raises(RemoteError) as caught:
        open_remote_session(RemoteTarget(url, "nuclei", token="s3cret", timeout_s=5, backoff_s=0.01),
                            on_retry=retries.append)
    line = str(caught.value)
    assert "\n" not in line and retries == []
    assert "certificate is not trusted" in line and caught.value.kind == "tls"
    assert "--" not in line  # no CLI option named: each face adds its own advice


def test_a_ca_file_on_a_plain_url_is_refused():
    with pytest.raises(RemoteError, match="a CA file is for TLS: use https:// or grpcs://"):
        RemoteTarget("grpc://127.0.0.1:8001", "nuclei", ca_file=Path("ca.pem"))


def test_a_ca_file_that_is_not_there_is_one_line(tmp_path):
    missing = tmp_path / "nope.pem"
    with pytest.raises(RemoteError, match=r"^remote 127.0.0.1:1/nuclei: the CA file .*nope.pem is not a readable"):
        open_remote_session(RemoteTarget("grpcs://127.0.0.1:1", "nuclei", ca_file=missing))
