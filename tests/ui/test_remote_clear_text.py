"""Model ▸ Device ▸ Remote server… and a token over http:// or grpc:// to a host that is not this machine (issue 36).

The remote client refuses to send credentials in clear text beyond loopback unless the user says so; the CLI's
word is --allow-insecure, which the viewer has not. The viewer's own is a checkbox in the dialog: off by default,
enabled only where it applies (no TLS, another host), with a warning beside it, remembered per server (never with
a secret), and its refusal names the checkbox. The server is tests/remote_mocks.py's MockServer reached through a
relay on this machine's own non-loopback address (a real socket: the address is not loopback to the client)."""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import keyring
import pytest
from remote_mocks import MockServer

from app.ui import actions
from tests.ui.test_remote_device import NUCLEI, TOKEN, WAIT, MemoryKeyring

CHECKBOX = "Send credentials without TLS to this server"


@pytest.fixture(autouse=True)
def store():
    """An in-memory keyring: never the user's."""
    before = keyring.get_keyring()
    keyring.set_keyring(MemoryKeyring())
    yield
    keyring.set_keyring(before)


def _own_address() -> str:
    """This machine's address on its network (not loopback): skip where it has none."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # a route is chosen; nothing is sent
        except OSError:
            pytest.skip("no network address besides loopback")
        address = probe.getsockname()[0]
    if address.startswith("127.") or address == "0.0.0.0":
        pytest.skip("no network address besides loopback")
    return address


@contextlib.contextmanager
def _relay(address: str, port: int) -> Iterator[int]:
    """A TCP relay listening on `address`, passing every connection to 127.0.0.1:`port`; its port."""
    listener = socket.create_server((address, 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def pipe(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)

    def serve() -> None:
        while not stop.is_set():
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", port))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=pipe, args=(a, b), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join(5)
        listener.close()


@pytest.fixture
def lan_server() -> Iterator[str]:
    """The mock's HTTP endpoint as this machine's network address sees it: http://<address>:<port>."""
    address = _own_address()
    with MockServer(NUCLEI, name="nuclei", token=TOKEN, device="CPU") as mock:
        port = int(mock.http_url.rsplit(":", 1)[1])
        with _relay(address, port) as relayed:
            yield f"http://{address}:{relayed}"


def _dialog(window, url: str):
    dialog = actions.remote_controller(window).open_dialog()
    dialog.url.setText(url)
    dialog.model.setText("nuclei")
    dialog.auth.setCurrentIndex(dialog.auth.findData("bearer"))
    dialog.token.setText(TOKEN)
    return dialog


def test_a_token_in_clear_text_to_another_host_is_refused_naming_the_checkbox_not_the_cli_flag(qtbot,
                                                                                              make_main_window):
    window = make_main_window(NUCLEI, device="cpu")
    dialog = _dialog(window, "http://gpu-box.invalid:8000")
    for button in (dialog.test_button, dialog.ok_button):
        button.click()
        assert dialog.answer.text() == (
            "server URL 'http://gpu-box.invalid:8000': credentials would travel in clear text to gpu-box.invalid "
            f"(http://): use https, or set “{CHECKBOX}” in Model ▸ Device ▸ Remote server… to accept that risk")
    assert dialog.isVisible() and window.state.model.info.remote is None  # nothing opened, nothing sent


@pytest.mark.parametrize(("url", "applies"), [
    ("http://gpu-box:8000", True), ("grpc://10.1.2.3:8001", True), ("grpc://[fd00::5]:8001", True),
    ("https://gpu-box", False), ("grpcs://gpu-box:8001", False), ("http://127.0.0.1:8000", False),
    ("grpc://localhost:8001", False), ("http://[::1]:8000", False), ("ftp://gpu-box", False), ("", False)])
def test_the_checkbox_is_off_and_enabled_only_for_clear_text_to_another_host(qtbot, make_main_window, url, applies):
    window = make_main_window(NUCLEI, device="cpu")
    dialog = _dialog(window, url)
    assert dialog.insecure.text() == CHECKBOX and not dialog.insecure.isChecked()
    assert dialog.insecure.isEnabled() is applies and dialog.insecure_warning.isVisible() is applies
    if applies:
        assert dialog.insecure_warning.text() == ("Anyone on the network between here and the server can read the "
                                                  "token or password: use https or grpcs where you can")
        dialog.insecure.setChecked(True)
        assert dialog.form().allow_insecure
        dialog.auth.setCurrentIndex(dialog.auth.findData("none"))  # no credentials: nothing to opt into
        assert not dialog.insecure.isVisible() and not dialog.form().allow_insecure
    else:
        dialog.insecure.setChecked(True)  # even set by hand, it gives nothing where it does not apply
        assert not dialog.form().allow_insecure


def test_ticked_the_token_reaches_a_server_on_another_address_and_the_choice_is_kept_for_that_server_only(
        qtbot, make_main_window, lan_server, caplog):
    caplog.set_level(logging.WARNING)
    window = make_main_window(NUCLEI, device="cpu")
    dialog = _dialog(window, lan_server)
    dialog.test_button.click()
    assert "credentials would travel in clear text" in dialog.answer.text()
    dialog.insecure.setChecked(True)
    dialog.test_button.click()
    qtbot.waitUntil(lambda: dialog.answer.text().startswith(("ready", "remote")), timeout=WAIT)
    assert dialog.answer.text() == "ready: nuclei (ONNX Runtime, server: CPU)"
    with qtbot.waitSignal(window.model_changed, timeout=WAIT):
        dialog.ok_button.click()
    assert window.state.model.info.remote is not None  # the session opened with the token, over the relay
    host = lan_server.removeprefix("http://")
    assert f"credentials sent in clear text to {host.rsplit(':', 1)[0]} (“{CHECKBOX}”" in caplog.text
    window.close()
    settings = Path(window.settings.fileName()).read_text()
    assert host in settings and TOKEN not in settings

    again = make_main_window(NUCLEI, device="cpu")  # the same settings file
    dialog = actions.remote_controller(again).open_dialog()
    assert dialog.url.text() == lan_server and dialog.insecure.isChecked()  # remembered for this server
    dialog.url.setText(lan_server.replace(host, "gpu-box.invalid:8000"))
    assert dialog.insecure.isEnabled() and not dialog.insecure.isChecked()  # another server: asked again
    dialog.url.setText(lan_server)
    assert dialog.insecure.isChecked()
