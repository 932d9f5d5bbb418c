"""A remote model's sidecar given by URL (`--config https://host/model.yaml`), served from a stdlib http.server on
loopback beside the protocol mock: parsed as the local sidecar is; the server's token sent to the server's host
only (never to another host, never in clear text to a TLS server's host); each failure one line (404, not YAML,
too large, a redirect, an untrusted certificate); a local model's URL sidecar refused in one line."""

from __future__ import annotations

import contextlib
import ssl
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from remote_mocks import MockServer, self_signed

from app.cli import main
from app.errors import SidecarError
from app.inference.model.builder import load_spec
from app.inference.remote.session import RemoteTarget, open_remote_session

REPO = Path(__file__).resolve().parents[3]
NUCLEI = REPO / "models" / "nuclei.onnx"
SIDECAR = NUCLEI.with_suffix(".yaml").read_bytes()


class Site:
    """`routes`: path → (status, body, extra headers); `seen`: (path, Authorization header or None) per request."""

    def __init__(self, tls: tuple[Path, Path] | None = None) -> None:
        self.routes: dict[str, tuple[int, bytes, dict[str, str]]] = {"/nuclei.yaml": (200, SIDECAR, {})}
        self.seen: list[tuple[str, str | None]] = []
        site = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # http.server's name
                path = self.path.split("?", 1)[0]
                site.seen.append((path, self.headers.get("Authorization")))
                status, body, headers = site.routes.get(path, (404, b"no such file", {}))
                self.send_response(status)
                for key, value in {"Content-Length": str(len(body)), **headers}.items():
                    self.send_header(key, value)
                self.end_headers()
                trickle = float(headers.get("X-Trickle", 0))  # a byte every so many seconds
                for start in range(0, len(body), 1 if trickle else len(body) or 1):
                    self.wfile.write(body[start:start + (1 if trickle else len(body))])
                    self.wfile.flush()
                    time.sleep(trickle)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(str(tls[0]), str(tls[1]))
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.scheme = "https" if tls else "http"

    def url(self, path: str = "/nuclei.yaml", host: str = "127.0.0.1") -> str:
        return f"{self.scheme}://{host}:{self.server.server_address[1]}{path}"


@contextlib.contextmanager
def _site(tls: tuple[Path, Path] | None = None) -> Iterator[Site]:
    site = Site(tls)
    thread = threading.Thread(target=site.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield site
    finally:
        site.server.shutdown()
        site.server.server_close()


@pytest.fixture(scope="module")
def server():
    with MockServer(NUCLEI, name="nuclei", token="s3cret") as mock:
        yield mock


def _target(url: str, **kwargs: Any) -> RemoteTarget:
    return RemoteTarget(url, "nuclei", **{"token": "s3cret", "timeout_s": 10.0, "retries": 0, **kwargs})


@pytest.mark.parametrize("face", ["http", "grpc"])
def test_a_sidecar_by_url_reads_as_the_local_one_with_the_servers_token(server, face):
    with _site() as site:
        remote = open_remote_session(_target(server.http_url if face == "http" else server.grpc_url),
                                     sidecar=site.url(), warm_up=False)
        local = load_spec(NUCLEI, NUCLEI.with_suffix(".yaml"))
        assert remote.spec.name == local.name == "Nuclei (demo, fluorescence)"
        assert (remote.spec.classes, remote.spec.input, remote.spec.output.threshold) == (
            local.classes, local.input, local.output.threshold)
        assert site.seen == [("/nuclei.yaml", "Bearer s3cret")]  # the same host as the server's: its credentials
        copy = remote.spec.sidecar
        assert copy is not None and copy.name == "nuclei.yaml" and copy.read_bytes() == SIDECAR
        remote.close()
        assert not copy.exists()  # the private copy goes with the session


def test_another_host_never_gets_the_token(server):
    with _site() as site:
        site.routes["/nuclei.yaml"] = (401, b"", {})
        with pytest.raises(SidecarError) as caught:  # 'localhost' is not the server's '127.0.0.1'
            open_remote_session(_target(server.http_url), sidecar=site.url(host="localhost"), warm_up=False)
        assert site.seen == [("/nuclei.yaml", None)]
        assert str(caught.value) == (f"sidecar {site.url(host='localhost')}: HTTP 401 not authorised: no token or "
                                     "a wrong one")


@pytest.mark.parametrize(("route", "problem"), [
    ((404, b"no", {}), "HTTP 404 not found"),
    ((200, b"name: [unclosed\n", {}), "invalid YAML at line 2: expected ',' or ']', but got '<stream end>'"),
    ((200, b"<html><body>login</body></html>", {}), "the sidecar must be a mapping of keys (name, task, input, ...)"),
    ((200, b"x" * ((1 << 20) + 1), {}), "sidecar too large (over 1 MiB; a sidecar is a short YAML file)"),
    ((302, b"", {"Location": "https://elsewhere.example/nuclei.yaml?sig=SECRET"}),
     "HTTP 302: redirected to https://elsewhere.example/nuclei.yaml; redirects are not followed (credentials "
     "would go along): give the final URL"),
])
def test_each_failure_is_one_line_naming_the_url(server, route, problem):
    with _site() as site:
        site.routes["/m.yaml"] = route
        url = site.url("/m.yaml")
        with pytest.raises(SidecarError) as caught:
            open_remote_session(_target(server.http_url), sidecar=url + "?sig=SECRET", warm_up=False)
        assert str(caught.value) == f"sidecar {url}: {problem}"  # the query (a signature) is never echoed


def test_an_untrusted_certificate_is_one_line_and_the_servers_ca_is_trusted_for_its_host(tmp_path):
    cert, key = self_signed(tmp_path)
    with _site(tls=(cert, key)) as site, MockServer(NUCLEI, name="nuclei", tls=(cert, key)) as tls_server:
        with pytest.raises(SidecarError) as caught:  # the system's trust store does not know the test's CA
            open_remote_session(_target(tls_server.grpc_url, token=None), sidecar=site.url(host="localhost"),
                                warm_up=False)
        assert str(caught.value).startswith(f"sidecar {site.url(host='localhost')}: the TLS certificate is not "
                                            "trusted (")
        assert str(caught.value).endswith("): trust the CA that signed it")
        remote = open_remote_session(_target(tls_server.grpc_url, ca_file=cert), sidecar=site.url(), warm_up=False)
        assert remote.spec.name == "Nuclei (demo, fluorescence)" and site.seen[-1][1] == "Bearer s3cret"
        remote.close()


def test_a_tls_servers_token_never_goes_to_its_host_in_clear_text(tmp_path):
    cert, key = self_signed(tmp_path)
    with _site() as site, MockServer(NUCLEI, name="nuclei", tls=(cert, key)) as tls_server:
        remote = open_remote_session(_target(tls_server.grpc_url, ca_file=cert, token="t0ken"), sidecar=site.url(),
                                     warm_up=False)
        assert site.seen == [("/nuclei.yaml", None)] and remote.spec.name == "Nuclei (demo, fluorescence)"
        remote.close()


def test_the_cli_takes_a_sidecar_url_and_a_local_model_refuses_one(server, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SEGLENS_REMOTE_TOKEN", "s3cret")
    with _site() as site:
        site.routes["/other.yaml"] = (200, b"name: Cells from the server\n", {})
        argv = ["info", "nuclei", "--device", "remote", "--server", server.http_url, "--no-session", "--json"]
        assert main([*argv, "--config", site.url("/other.yaml")]) == 0
        assert '"name": "Cells from the server"' in capsys.readouterr().out
        assert main(["info", str(NUCLEI), "--config", site.url("/other.yaml")]) == 2
    assert capsys.readouterr().err.strip() == (f"error: {site.url('/other.yaml')}: a sidecar given by URL is fetched "
                                               "for a model on a server (--device remote); for a local model, "
                                               "download it beside the model")


def test_a_trickling_sidecar_cannot_outlive_the_timeout(server):
    with _site() as site:
        site.routes["/slow.yaml"] = (200, SIDECAR, {"X-Trickle": "0.05"})  # every read well within the timeout
        started = time.monotonic()
        with pytest.raises(SidecarError) as caught:
            open_remote_session(_target(server.http_url, timeout_s=1.0), sidecar=site.url("/slow.yaml"),
                                warm_up=False)
        assert time.monotonic() - started < 4.0
    assert str(caught.value) == f"sidecar {site.url('/slow.yaml')}: no whole answer within 1 s"


def test_a_sidecar_name_from_the_url_stays_in_the_sessions_folder(server):
    with _site() as site:
        site.routes["/..%2F..%2Fevil.yaml"] = (200, SIDECAR, {})
        remote = open_remote_session(_target(server.http_url), sidecar=site.url("/..%2F..%2Fevil.yaml"),
                                     warm_up=False)
        copy = remote.spec.sidecar
        assert copy is not None and copy.name == "evil.yaml" and copy.parent == Path(remote.fetched.name)
        remote.close()
