"""Model ▸ Device ▸ Remote server…: the viewer with its model on an inference server (tests/remote_mocks.py's
MockServer, the Open Inference Protocol from its published schema, running the bundled nuclei model).

The same overlay as a local CPU session, the status bar's "remote: host/model (platform, device)" and split
latency, a wrong token in one line with the viewer still working on a local device, the busy server's retry line
that clears when it answers, Test connection, and the secret: in the (in-memory) keyring only when asked, never in
the settings file nor a log. No timing is asserted; the waits are generous."""

from __future__ import annotations

import logging
from pathlib import Path

import keyring
import keyring.backend
import keyring.backends.fail
import numpy as np
import pytest
from PIL import Image
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QMenu
from remote_mocks import MockServer, self_signed
from serve_fixtures import TOKEN as SERVE_TOKEN
from serve_fixtures import served  # noqa: F401  # the fixture: `seglens-cli serve nuclei` as a subprocess

from app.ui import actions

REPO = Path(__file__).resolve().parents[2]
NUCLEI = REPO / "models" / "nuclei.onnx"
SAMPLES = REPO / "resources" / "samples" / "nuclei"
TOKEN = "s3cret-token-42"
WAIT = 30_000  # ms


class MemoryKeyring(keyring.backend.KeyringBackend):
    """A keyring backend in memory (keyring's own plug-in interface), standing in for the OS keyring."""

    priority = 1  # type: ignore[assignment]

    def __init__(self) -> None:
        super().__init__()
        self.secrets: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.secrets.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.secrets[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        self.secrets.pop((service, username), None)


@pytest.fixture(autouse=True)
def store():
    """Every test here on an in-memory keyring: never the user's."""
    before = keyring.get_keyring()
    chosen = MemoryKeyring()
    keyring.set_keyring(chosen)
    yield chosen
    keyring.set_keyring(before)


@pytest.fixture
def server():
    with MockServer(NUCLEI, name="nuclei", token=TOKEN, device="CPU") as mock:
        yield mock


@pytest.fixture
def window(make_main_window):
    return make_main_window(NUCLEI, device="cpu")


def _dialog(window, url: str, *, token: str = TOKEN, remember: bool = False, sidecar: Path | None = None):
    dialog = actions.remote_controller(window).open_dialog()
    dialog.url.setText(url)
    dialog.model.setText("nuclei")
    dialog.auth.setCurrentIndex(dialog.auth.findData("bearer"))
    dialog.token.setText(token)
    dialog.remember.setChecked(remember)
    dialog.sidecar.setText(str(sidecar) if sidecar else "")
    return dialog


def _show(qtbot, window, path: Path, first: Path | None = None):
    """Open `path` (a folder: `first` is the picture it shows first) and wait for its overlay."""
    shows = str(first or path)
    with qtbot.waitSignal(window.overlay_shown, timeout=WAIT, check_params_cb=lambda shown: shown == shows):
        window.add_paths([path])
    return window.state.on_screen


def _device_menu(window) -> QMenu:
    menu = next(m for m in window.findChildren(QMenu) if m.title() == "Device")
    menu.aboutToShow.emit()  # what opening it does: the device in use checked
    return menu


def test_the_remote_device_shows_the_local_overlay_and_says_where_it_runs(qtbot, window, server, caplog):
    caplog.set_level(logging.DEBUG)
    sample = SAMPLES / "nuclei_01.png"
    local = _show(qtbot, window, sample)
    local_name = window.state.model.spec.name
    dialog = _dialog(window, server.grpc_url, sidecar=NUCLEI.with_suffix(".yaml"))
    with qtbot.waitSignal(window.model_changed, timeout=WAIT):
        dialog.ok_button.click()
    assert dialog.isHidden()
    with qtbot.waitSignal(window.overlay_shown, timeout=WAIT):
        pass  # the loader shows the picture again with the new session
    remote = window.state.on_screen
    assert remote is not local and window.state.model.info.remote is not None
    assert np.array_equal(remote.result.mask, local.result.mask)
    assert np.array_equal(remote.display_mask, local.display_mask)
    host = server.grpc_url.removeprefix("grpc://")
    label = f"remote: {host}/nuclei (ONNX Runtime, server: CPU)"  # the server's CPU, not this computer's
    assert window.status.provider.text() == label
    assert "network+queue" in window.status.latency.text() and "server" in window.status.latency.text()
    assert f"on remote {host}/nuclei" in window.panel._model_label.text().replace("\u200b", "")
    assert window.windowTitle() == f"{window.state.model.spec.name} on remote {host}/nuclei — SegLens"
    checked = [a.text() for a in _device_menu(window).actions() if a.isChecked()]
    assert checked == [f"Remote: {host}/nuclei"]
    assert window.device == "cpu"  # what the settings remember: the local device

    with qtbot.waitSignal(window.model_changed, timeout=WAIT):  # back to the last local model file
        next(a for a in _device_menu(window).actions() if a.data() == "cpu").trigger()
    assert window.state.model.info.remote is None and window.status.provider.text() == "CPU"
    with qtbot.waitSignal(window.overlay_shown, timeout=WAIT):
        pass
    assert np.array_equal(window.state.on_screen.result.mask, local.result.mask)
    assert [a.text() for a in _device_menu(window).actions() if a.isChecked()] == ["CPU"]
    with qtbot.waitSignal(window.model_changed, timeout=WAIT):  # and to the server again, from the same menu
        next(a for a in _device_menu(window).actions() if a.text() == f"Remote: {host}/nuclei").trigger()
    assert window.status.provider.text() == label and window.state.model.spec.name == local_name
    window.save_settings()
    settings = Path(window.settings.fileName()).read_text()
    assert server.grpc_url in settings and TOKEN not in settings
    assert TOKEN not in caplog.text


def test_a_wrong_token_is_one_line_and_a_local_device_still_works(qtbot, window, server):
    sample = SAMPLES / "nuclei_01.png"
    _show(qtbot, window, sample)
    dialog = _dialog(window, server.http_url, token="not-the-token-77")
    with qtbot.waitSignal(window.model_failed, timeout=WAIT) as failed:
        dialog.ok_button.click()
    host = server.http_url.removeprefix("http://")
    message = failed.args[0]
    assert message.startswith(f"remote {host}/nuclei: refused: not authorised (HTTP 401")
    assert "\n" not in message and "not-the-token-77" not in message
    # the viewer's own advice, not the CLI's options
    assert message.endswith("no token or a wrong one — check the token (or user and password) in Model ▸ Device ▸ "
                            "Remote server…") and "--" not in message
    assert window.status.currentMessage() == f"Model error: {message}"
    with qtbot.waitSignal(window.model_changed, timeout=WAIT):
        window.open_model(device="cpu")
    assert window.status.provider.text() == "CPU"
    shown = _show(qtbot, window, SAMPLES / "nuclei_02_dense.png")
    assert shown.result.mask is not None and shown.result.mask.any()


def test_a_busy_server_shows_the_retry_line_until_it_answers(qtbot, window, server):
    dialog = _dialog(window, server.grpc_url)
    with qtbot.waitSignal(window.model_changed, timeout=WAIT):
        dialog.ok_button.click()
    label = window.status.provider.text()
    assert label.startswith("remote: ")
    assert window.state.model.spec.name == "Nuclei (demo, fluorescence)"  # no sidecar given: the bundled one's
    lines: list[str] = []
    window.worker.remote_retrying.connect(lambda retrying: lines.append(retrying.line))  # on the worker's thread
    server.state.busy = 2  # the next two requests: UNAVAILABLE
    sample = SAMPLES / "nuclei_02_dense.png"
    window.add_paths([sample])
    qtbot.waitUntil(lambda: window.status.provider.text().startswith("⚠ "), timeout=WAIT)
    shown = window.status.provider.text()
    assert " — retrying in " in shown and "(attempt 2 of 4)" in shown, shown
    qtbot.waitUntil(lambda: window.state.on_screen is not None and window.state.on_screen.path == sample,
                    timeout=WAIT)
    qtbot.waitUntil(lambda: window.status.provider.text() == label, timeout=WAIT)
    assert len(lines) == 2 and lines[1].endswith("(attempt 3 of 4)")
    assert window.status.provider.styleSheet() != "" and "#ffcc00" not in window.status.provider.styleSheet()


def test_a_silent_server_leaves_the_viewer_responsive_and_it_goes_on_when_it_answers(qtbot, window, server):
    dialog = _dialog(window, server.grpc_url)
    dialog.timeout.setValue(1)
    with qtbot.waitSignal(window.model_changed, timeout=WAIT):
        dialog.ok_button.click()
    label = window.status.provider.text()
    ticks: list[int] = []
    timer = QTimer()
    timer.timeout.connect(lambda: ticks.append(1))  # runs only while the GUI thread's event loop does
    timer.start(20)
    server.state.hang = True  # requests are taken and never answered
    sample = SAMPLES / "nuclei_02_dense.png"
    window.add_paths([sample])
    qtbot.waitUntil(lambda: window.status.provider.text().startswith("⚠ "), timeout=WAIT)
    assert ticks, "the GUI thread stood still while the inference thread waited on the server"
    assert " — retrying in " in window.status.provider.text()
    assert "within" in window.status.provider.toolTip()  # the whole line: no answer within the timeout
    assert window.status.provider.toolTip().endswith("Model ▸ Device ▸ CPU stops waiting for the server at once.")
    server.state.hang = False
    qtbot.waitUntil(lambda: window.state.on_screen is not None and window.state.on_screen.path == sample,
                    timeout=WAIT)
    qtbot.waitUntil(lambda: window.status.provider.text() == label, timeout=WAIT)
    timer.stop()
    assert "timeout_s=1" in Path(window.settings.fileName()).read_text()  # remembered with the server


def test_a_server_that_stays_busy_is_one_line_and_the_next_picture_tries_again(qtbot, window, server):
    dialog = _dialog(window, server.grpc_url)
    with qtbot.waitSignal(window.model_changed, timeout=WAIT):
        dialog.ok_button.click()
    label = window.status.provider.text()
    server.state.busy = 4  # every try of the next picture: 1 + 3 retries
    sample = SAMPLES / "nuclei_02_dense.png"
    with qtbot.waitSignal(window.image_failed, timeout=WAIT) as failed:
        window.add_paths([sample])
    host = server.grpc_url.removeprefix("grpc://")
    message = failed.args[1]
    line = message.removeprefix(f"{sample}: ")
    busy = "the server is unavailable or the model not ready (gRPC UNAVAILABLE"
    assert line.startswith(f"remote {host}/nuclei: {busy}") and "\n" not in line
    assert line.endswith("(tried 4 times) — check the server or use a local device (Model ▸ Device)")
    assert window.status.currentMessage() == f"Error: {sample.name}: no result from {host} after 4 tries — " \
                                             "check the server or use a local device (Model ▸ Device)"
    assert window.status.provider.text() == "⚠ remote: no result"  # failed, until a request is answered
    shown = _show(qtbot, window, SAMPLES / "nuclei_01.png")  # the server answers again: so does the viewer
    assert shown.result.mask is not None and window.status.provider.text() == label


def test_run_on_all_on_the_server_writes_the_local_masks(qtbot, window, server, tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    for name in ("nuclei_01.png", "nuclei_02_dense.png"):
        (folder / name).write_bytes((SAMPLES / name).read_bytes())
    _show(qtbot, window, folder, folder / "nuclei_01.png")
    written = {}
    for device in ("cpu", "remote"):
        if device == "remote":
            dialog = _dialog(window, server.grpc_url, sidecar=NUCLEI.with_suffix(".yaml"))
            with qtbot.waitSignal(window.model_changed, timeout=WAIT):
                dialog.ok_button.click()
        with qtbot.waitSignal(window.run_all_finished, timeout=WAIT):
            window.run_all(tmp_path / device, save=("mask",))
        written[device] = {p.relative_to(tmp_path / device): np.asarray(Image.open(p))
                           for p in sorted((tmp_path / device).rglob("*.png"))}
    assert len(written["cpu"]) == 2 and written["remote"].keys() == written["cpu"].keys()
    for name, mask in written["cpu"].items():  # the pixels (the files' provenance says where each ran)
        assert mask.any() and np.array_equal(written["remote"][name], mask)


def test_test_connection_says_ready_or_the_error_in_one_line(qtbot, window, server):
    dialog = _dialog(window, server.grpc_url)
    dialog.test_button.click()
    qtbot.waitUntil(lambda: dialog.answer.text().startswith(("ready", "remote")), timeout=WAIT)
    assert dialog.answer.text() == "ready: nuclei (ONNX Runtime, server: CPU)"
    dialog.token.setText("wrong")
    dialog.test_button.click()
    qtbot.waitUntil(lambda: dialog.answer.text().startswith("remote"), timeout=WAIT)
    host = server.grpc_url.removeprefix("grpc://")
    assert dialog.answer.text().startswith(f"remote {host}/nuclei: refused: not authorised (gRPC UNAUTHENTICATED")
    assert "\n" not in dialog.answer.text()
    dialog.url.setText("ftp://nowhere")
    dialog.test_button.click()
    assert dialog.answer.text() == "server URL 'ftp://nowhere': expected grpc://, grpcs://, http:// or https:// " \
                                   "followed by host:port"
    assert window.state.model.info.remote is None  # a test opens no session for the viewer


def test_the_secret_is_kept_in_the_keyring_only_when_asked(qtbot, make_main_window, server, store, caplog):
    caplog.set_level(logging.DEBUG)
    window = make_main_window(NUCLEI, device="cpu")
    dialog = _dialog(window, server.grpc_url, remember=True)
    with qtbot.waitSignal(window.model_changed, timeout=WAIT):
        dialog.ok_button.click()
    host = server.grpc_url.removeprefix("grpc://")
    qtbot.waitUntil(lambda: store.secrets.get(("seglens-remote", host)) == TOKEN, timeout=WAIT)
    window.close()
    settings = Path(window.settings.fileName()).read_text()
    assert server.grpc_url in settings and TOKEN not in settings

    again = make_main_window(NUCLEI, device="cpu")  # the same settings file: the form and the keyring's token
    dialog = actions.remote_controller(again).open_dialog()
    assert dialog.url.text() == server.grpc_url and dialog.model.text() == "nuclei"
    qtbot.waitUntil(lambda: dialog.token.text() == TOKEN, timeout=WAIT)
    assert dialog.remember.isChecked()
    dialog.remember.setChecked(False)  # unticked: what the keyring kept for the server is forgotten
    with qtbot.waitSignal(again.model_changed, timeout=WAIT):
        dialog.ok_button.click()
    qtbot.waitUntil(lambda: ("seglens-remote", host) not in store.secrets, timeout=WAIT)
    assert TOKEN not in repr(again.loader.remote) and TOKEN not in caplog.text


def test_no_usable_keyring_is_one_line_and_the_session_still_opens(qtbot, window, server):
    keyring.set_keyring(keyring.backends.fail.Keyring())
    dialog = _dialog(window, server.grpc_url, remember=True)
    with qtbot.waitSignal(window.model_changed, timeout=WAIT):
        dialog.ok_button.click()
    qtbot.waitUntil(lambda: "keyring" in window.status.currentMessage(), timeout=WAIT)
    assert window.status.currentMessage() == ("no usable keyring (NoKeyringError): the secret is not remembered; "
                                              "install a keyring backend")
    assert window.state.model.info.remote is not None


def test_tls_with_the_ca_bundle_and_without_it(qtbot, window, tmp_path):
    cert, key = self_signed(tmp_path)
    with MockServer(NUCLEI, name="nuclei", token=TOKEN, tls=(cert, key), device="CPU") as server:
        dialog = _dialog(window, server.grpc_url)
        dialog.test_button.click()
        qtbot.waitUntil(lambda: dialog.answer.text().startswith(("ready", "remote")), timeout=WAIT)
        host = server.grpc_url.removeprefix("grpcs://")
        assert dialog.answer.text().startswith(f"remote {host}/nuclei: TLS handshake failed")
        dialog.ca_file.setText(str(tmp_path / "missing.pem"))
        dialog.test_button.click()
        assert dialog.answer.text() == "CA bundle missing.pem: no such file"
        dialog.ca_file.setText(str(cert))
        dialog.test_button.click()
        qtbot.waitUntil(lambda: dialog.answer.text().startswith("ready"), timeout=WAIT)
        with qtbot.waitSignal(window.model_changed, timeout=WAIT):
            dialog.ok_button.click()
        assert window.status.provider.text().startswith(f"remote: {host}/nuclei")
    assert str(cert) in Path(window.settings.fileName()).read_text()  # the CA bundle's path is remembered


def test_the_viewer_on_seglens_cli_serve_shows_the_local_overlay(qtbot, window, served):  # noqa: F811
    sample = SAMPLES / "nuclei_01.png"
    local = _show(qtbot, window, sample)
    dialog = _dialog(window, served.grpc_url, token=SERVE_TOKEN)
    with qtbot.waitSignal(window.model_changed, timeout=WAIT):
        dialog.ok_button.click()
    with qtbot.waitSignal(window.overlay_shown, timeout=WAIT):
        pass
    assert np.array_equal(window.state.on_screen.result.mask, local.result.mask)
    assert window.status.provider.text() == f"remote: {served.grpc_address}/nuclei (ONNX Runtime, server: CPU)"


def test_cancelling_the_dialog_leaves_the_device_in_use_checked(qtbot, window, server):
    menu = _device_menu(window)
    next(a for a in menu.actions() if a.text() == "Remote server…").trigger()
    dialog = actions.remote_controller(window).open_dialog()
    assert dialog.isVisible()
    dialog.reject()  # Cancel
    assert [a.text() for a in _device_menu(window).actions() if a.isChecked()] == ["CPU"]
    assert window.state.model.info.remote is None and window.loader.remote is None
    dialog = _dialog(window, server.grpc_url)
    with qtbot.waitSignal(window.model_changed, timeout=WAIT):
        dialog.ok_button.click()
    host = server.grpc_url.removeprefix("grpc://")
    actions.remote_controller(window).open_dialog().reject()  # on the server: it stays the device, checked
    assert [a.text() for a in _device_menu(window).actions() if a.isChecked()] == [f"Remote: {host}/nuclei"]
    assert window.state.model.info.remote is not None
