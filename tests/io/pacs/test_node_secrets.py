"""A node's secret on the wire, against a real HTTP server on this machine that records what it is sent: a
secret from the environment reaches only the node it was meant for, and never travels in clear text to a host
that is not loopback unless the node's settings say `allow_insecure: true`."""

from __future__ import annotations

import base64
import http.server
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from app.io.pacs.client import PacsError
from app.io.pacs.connect import connect
from app.io.pacs.nodes import load_nodes


class _Recorder(http.server.BaseHTTPRequestHandler):
    seen: ClassVar[list[str]] = []

    def do_GET(self) -> None:  # http.server's name
        type(self).seen.append(self.headers.get("Authorization", ""))
        body = b"[]"
        self.send_response(200)
        self.send_header("Content-Type", "application/dicom+json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def recorder() -> Iterator[tuple[int, list[str]]]:
    """A QIDO-RS server answering every GET with no match, on every interface; (port, Authorization headers)."""
    seen: list[str] = []
    handler = type("Recorder", (_Recorder,), {"seen": seen})
    server = http.server.ThreadingHTTPServer(("0.0.0.0", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1]), seen
    finally:
        server.shutdown()
        server.server_close()


def _settings(tmp_path: Path, text: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    settings = tmp_path / "settings.yaml"
    settings.write_text(text, encoding="utf-8")
    monkeypatch.setenv("SEGLENS_SETTINGS", str(settings))
    return settings


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def test_the_plain_variable_goes_to_no_node_of_several(recorder, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Two settings nodes with auth and SEGLENS_PACS_SECRET set for one of them: the other gets nothing (it was
    sent SEGLENS_PACS_SECRET before); each gets its own SEGLENS_PACS_SECRET_<NAME>."""
    port, seen = recorder
    url = f"dicomweb+http://127.0.0.1:{port}/dicom-web"
    nodes = load_nodes(_settings(tmp_path, f"pacs:\n  A:\n    url: {url}\n    auth: basic\n    username: alice\n"
                                           f"  B:\n    url: {url}\n    auth: basic\n    username: bob\n",
                                 monkeypatch))
    monkeypatch.setenv("SEGLENS_PACS_SECRET", "meant-for-A")
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")
    with pytest.raises(PacsError) as err:
        connect(nodes["B"]).echo()
    assert str(err.value).startswith("pacs B: ")
    assert seen == []  # nothing sent to B, its password above all
    monkeypatch.setenv("SEGLENS_PACS_SECRET_A", "alice-pw")
    monkeypatch.setenv("SEGLENS_PACS_SECRET_B", "bob-pw")
    connect(nodes["A"]).echo()
    connect(nodes["B"]).echo()
    assert seen == [_basic("alice", "alice-pw"), _basic("bob", "bob-pw")]


def _outside_address() -> str | None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.77", 9))  # no packet is sent: only the route is chosen
        except OSError:
            return None
        address = str(probe.getsockname()[0])
    return None if address.startswith("127.") else address


def test_no_secret_in_clear_text_to_a_host_off_loopback_unless_the_settings_allow_it(
        recorder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    address = _outside_address()
    if address is None:
        pytest.skip("this machine has no address off loopback")
    port, seen = recorder
    url = f"dicomweb+http://{address}:{port}/dicom-web"
    entry = f"    url: {url}\n    auth: basic\n    username: alice\n"
    nodes = load_nodes(_settings(tmp_path, f"pacs:\n  PLAIN:\n{entry}  OPTED:\n{entry}    allow_insecure: true\n",
                                 monkeypatch))
    monkeypatch.setenv("SEGLENS_PACS_SECRET_PLAIN", "pw")
    monkeypatch.setenv("SEGLENS_PACS_SECRET_OPTED", "pw")
    with pytest.raises(PacsError) as err:
        connect(nodes["PLAIN"]).echo()
    assert str(err.value) == (f"pacs PLAIN: credentials would travel in clear text to {address} (http://): use "
                              "https, or set allow_insecure: true in the settings of pacs.PLAIN to accept that risk")
    assert seen == []
    connect(nodes["OPTED"]).echo()
    assert seen == [_basic("alice", "pw")]
