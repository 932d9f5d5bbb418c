"""`seglens-cli serve` as a command: refusals in one line before anything is served (an open non-loopback bind, TLS
files, ports, a missing extra), TLS on REST and gRPC with a self-signed certificate, the exit codes of a stop."""

from __future__ import annotations

import datetime
import ipaddress
import json
import signal
import socket
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from waiting import until

from tests.serve_fixtures import REPO, TOKEN, free_ports, serve_command, serve_env, start_serve


def _refused(*args: str, token: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(serve_command(*args), cwd=REPO, env=serve_env(token), capture_output=True, text=True,
                          timeout=120)


def test_binding_every_interface_without_a_token_is_refused_in_one_line():
    done = _refused("nuclei", "--host", "0.0.0.0", "--port", str(free_ports(1)[0]))
    assert done.returncode == 2
    assert done.stderr == ("error: serve on 0.0.0.0 would be reachable from other machines without a token: set one "
                           "(--token-env VAR, default SEGLENS_SERVE_TOKEN) or bind 127.0.0.1; --no-auth serves it "
                           "open anyway\n")
    assert done.stdout == ""


def test_a_token_env_that_is_not_set_and_a_lone_tls_file_are_one_line_each(tmp_path: Path):
    done = _refused("nuclei", "--token-env", "SEGLENS_NO_SUCH_VARIABLE")
    assert (done.returncode, done.stderr) == (
        2, "error: --token-env SEGLENS_NO_SUCH_VARIABLE: the environment variable is not set (or empty)\n")
    done = _refused("nuclei", "--tls-cert", str(tmp_path / "c.pem"))
    assert (done.returncode, done.stderr) == (
        2, "error: --tls-cert and --tls-key go together (the certificate and its private key)\n")


def test_a_missing_or_foreign_tls_file_is_named_in_one_line(tmp_path: Path):
    cert, key = _self_signed(tmp_path)
    missing = tmp_path / "nope.pem"
    done = _refused("nuclei", "--tls-cert", str(missing), "--tls-key", str(key))
    assert (done.returncode, done.stderr) == (2, f"error: {missing}: cannot read the TLS certificate: "
                                                 "No such file or directory\n")
    text = tmp_path / "key.txt"
    text.write_text("not a key")
    done = _refused("nuclei", "--tls-cert", str(cert), "--tls-key", str(text))
    assert (done.returncode, done.stderr) == (2, f"error: {text}: the TLS key is not a PEM file\n")
    _, other_key = _self_signed(tmp_path / "other")
    done = _refused("nuclei", "--tls-cert", str(cert), "--tls-key", str(other_key))
    assert done.returncode == 2
    assert done.stderr.startswith(f"error: {cert}: the TLS certificate and the key key.pem do not load as a pair (")
    assert done.stderr.count("\n") == 1


def test_an_unknown_model_and_a_port_in_use_are_one_line_each(tmp_path: Path):
    done = _refused("no_such_model")
    assert done.returncode == 2 and done.stderr.startswith("error: unknown model 'no_such_model'")
    assert done.stderr.count("\n") == 1
    server = start_serve(tmp_path / "first", "nuclei")
    try:
        done = _refused("nuclei", "--port", str(server.port), "--grpc-port", str(free_ports(1)[0]),
                        "--device", "cpu")
        assert (done.returncode, done.stderr) == (
            2, f"error: cannot listen on http://127.0.0.1:{server.port}: Address already in use\n")
        done = _refused("nuclei", "--port", str(free_ports(1)[0]), "--grpc-port", str(server.grpc_port),
                        "--device", "cpu")
        assert done.returncode == 2
        assert done.stderr.endswith(f"error: cannot listen on grpc://127.0.0.1:{server.grpc_port}: the port is in use "
                                    "or the address is not this machine's\n")
    finally:
        server.stop()


def test_sigint_and_sigterm_stop_it_cleanly_with_130_and_143(tmp_path: Path):
    for sig, code, said in ((signal.SIGINT, 130, "stopped (Ctrl+C)\n"), (signal.SIGTERM, 143, "stopped (SIGTERM)\n")):
        server = start_serve(tmp_path / str(code), "nuclei", token=None)
        assert server.stdout().startswith("serving nuclei on http://127.0.0.1:")
        assert server.stdout().rstrip().endswith("CPU, no token (open)")
        assert server.stop(sig) == code
        assert server.stderr().endswith(said)
        assert "Traceback" not in server.stderr()


def _refusing(port: int) -> bool:
    """Whether nothing listens on `port` any more (serve closed its REST socket: its graceful stop has begun)."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return True
    return False


def test_a_second_sigterm_during_the_graceful_stop_ends_it_at_once_in_one_line_with_143(tmp_path: Path):
    # a second SIGTERM made uvicorn cancel the request in flight and its lifespan: two tracebacks on stderr
    server = start_serve(tmp_path / "twice", "nuclei", token=None)
    held = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    try:  # a request answered on the connection (it is served), then one whose body is still coming: the graceful
        # stop waits for it (GRACE_S)
        held.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
        assert held.recv(4096).startswith(b"HTTP/1.1 200")
        held.sendall(b"POST /v2/models/nuclei/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 100000\r\n\r\n{\"inputs\": [")
        server.process.send_signal(signal.SIGTERM)
        until(lambda: _refusing(server.port), what="the REST port closed by the graceful stop", within_s=60)
        assert server.process.poll() is None, "the graceful stop ended before the second SIGTERM"
        assert server.stop(signal.SIGTERM) == 143
    finally:
        held.close()
        server.stop(signal.SIGKILL)
    stderr = server.stderr()
    assert "Traceback" not in stderr and "ERROR" not in stderr, stderr
    assert stderr.endswith("stopped at once (a second SIGTERM): the requests in flight were cut off\n"), stderr


def test_no_auth_serves_every_interface_open_with_a_warning(tmp_path: Path):
    server = start_serve(tmp_path / "open", "nuclei", token=None, args=("--host", "0.0.0.0", "--no-auth"))
    try:
        with urllib.request.urlopen(f"{server.url}/v2/models/nuclei", timeout=30) as answer:
            assert json.loads(answer.read())["name"] == "nuclei"
    finally:
        server.stop()
    assert server.stderr().startswith("warning: serving on 0.0.0.0 with no token (--no-auth): anyone who reaches "
                                      "this port can run the models\n")
    assert "http://0.0.0.0:" in server.stdout()


def test_tls_serves_https_and_grpcs_that_a_client_with_the_ca_trusts(tmp_path: Path):
    import tritonclient.grpc as tg
    import tritonclient.http as th

    cert, key = _self_signed(tmp_path)
    server = start_serve(tmp_path / "tls", "nuclei", args=("--tls-cert", str(cert), "--tls-key", str(key)),
                         tls_ca=cert)
    try:
        assert server.stdout().startswith(f"serving nuclei on https://127.0.0.1:{server.port} and "
                                          f"grpcs://127.0.0.1:{server.grpc_port}, CPU, token required")
        context = ssl.create_default_context(cafile=str(cert))
        request = urllib.request.Request(f"{server.url}/v2/models/nuclei", headers=server.headers)
        with urllib.request.urlopen(request, timeout=30, context=context) as answer:
            assert json.loads(answer.read())["platform"] == "onnxruntime_onnx"
        with pytest.raises(urllib.error.URLError) as refused:  # without the CA: refused, not silently trusted
            urllib.request.urlopen(f"{server.url}/v2/health/live", timeout=30)
        assert isinstance(refused.value.reason, ssl.SSLCertVerificationError)
        x = np.random.default_rng(7).random((1, 1, 256, 256), dtype=np.float32)
        client = th.InferenceServerClient(f"127.0.0.1:{server.port}", ssl=True, ssl_options={"ca_certs": str(cert)})
        tensor = th.InferInput("input", list(x.shape), "FP32")
        tensor.set_data_from_numpy(x, binary_data=True)
        over_https = client.infer("nuclei", [tensor], headers=dict(server.headers)).as_numpy("probability")
        client.close()
        grpc_client = tg.InferenceServerClient(server.grpc_address, ssl=True, root_certificates=str(cert))
        tensor = tg.InferInput("input", list(x.shape), "FP32")
        tensor.set_data_from_numpy(x)
        over_grpcs = grpc_client.infer("nuclei", [tensor], headers={"authorization": f"Bearer {TOKEN}"},
                                       client_timeout=60).as_numpy("probability")
        grpc_client.close()
        assert over_https.tobytes() == over_grpcs.tobytes()
    finally:
        server.stop()


def test_without_kserve_serve_says_which_extra_to_install_in_one_line(monkeypatch, capsys):
    from importlib import metadata

    from app.cli import main

    real = metadata.version

    def version(name: str) -> str:
        if name == "kserve":
            raise metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(metadata, "version", version)
    assert main(["serve", "nuclei"]) == 2
    assert capsys.readouterr().err == ("error: seglens-cli serve needs the 'serve' extra: "
                                       'pip install "seglens[serve]"\n')


def test_another_kserve_version_is_refused_rather_than_patched(monkeypatch):
    from importlib import metadata

    from app.errors import SegLensError
    from app.serve.kserve import load_kserve

    monkeypatch.setattr(metadata, "version", lambda name: "0.22.0")
    with pytest.raises(SegLensError) as caught:
        load_kserve()
    assert str(caught.value) == ("serve is written for kserve 0.21.0 (its binary-tensor decode is patched for that "
                                 "version), found kserve 0.22.0: pip install 'kserve==0.21.0'")


def test_the_serve_process_never_loads_tritonclient_grpc():
    """kserve and tritonclient.grpc cannot share a process (the same protobuf names); the CLI's parser and
    serve's modules load neither the remote client nor tritonclient."""
    code = ("import sys; from app.cli import build_parser; build_parser(); "
            "from app.serve.kserve import load_kserve; load_kserve(); "
            "import app.serve.server, app.serve.model, app.cli.serve; "
            "print(sorted(m for m in sys.modules if m.startswith(('tritonclient', 'app.inference.remote'))))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                          check=True)
    assert done.stdout.strip() == "[]"


def _self_signed(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 / localhost (its own CA) and its key, as PEM files."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    folder.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "seglens-test")])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                    x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256()))
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


def test_cuda_asked_for_on_a_machine_without_one_says_why_at_start_and_in_every_answer(tmp_path: Path):
    from app.inference.runtime.providers import detect_nvidia_gpu

    if detect_nvidia_gpu() is not None:
        pytest.skip("a GPU is here: CUDA does not fall back")
    server = start_serve(tmp_path / "cuda", "nuclei", token=None, args=("--device", "cuda"))
    try:
        lines = server.stdout().splitlines()
        assert lines[0].endswith(", CPU (no NVIDIA GPU), no token (open)")
        assert lines[1].startswith("note: nuclei: cuda was asked for, it runs on CPU (no NVIDIA GPU): ")
        reason = lines[1].split(": ", 3)[3]
        body = {"inputs": [{"name": "input", "shape": [1, 1, 256, 256], "datatype": "FP32", "data": [0.5] * 65536}]}
        request = urllib.request.Request(f"{server.url}/v2/models/nuclei/infer", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as answer:
            parameters = json.loads(answer.read())["parameters"]
        assert parameters["seglens_device"] == "CPU (no NVIDIA GPU)"
        assert parameters["seglens_fallback"] == reason and reason
    finally:
        server.stop()


def test_a_1080p_answer_of_25_mb_crosses_grpc_and_rest_whole(tmp_path: Path):
    """KServe's stock gRPC server caps messages at 8 MiB; ct_demo's logits for a 1080p slice are 24.9 MB."""
    import onnxruntime as ort
    import tritonclient.grpc as tg
    import tritonclient.http as th

    x = np.random.default_rng(11).random((1, 1, 1080, 1920), dtype=np.float32)
    local = ort.InferenceSession(str(REPO / "models" / "ct_demo.onnx"),
                                 providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
    assert local.nbytes == 24_883_200
    server = start_serve(tmp_path / "ct", "ct_demo", token=None)
    try:
        client = tg.InferenceServerClient(server.grpc_address)
        tensor = tg.InferInput("input", list(x.shape), "FP32")
        tensor.set_data_from_numpy(x)
        over_grpc = client.infer("ct_demo", [tensor], client_timeout=120).as_numpy("logits")
        client.close()
        http_client = th.InferenceServerClient(f"127.0.0.1:{server.port}", network_timeout=120)
        tensor = th.InferInput("input", list(x.shape), "FP32")
        tensor.set_data_from_numpy(x, binary_data=True)
        over_rest = http_client.infer("ct_demo", [tensor]).as_numpy("logits")
        http_client.close()
    finally:
        server.stop()
    assert over_grpc.tobytes() == local.tobytes() and over_rest.tobytes() == local.tobytes()
