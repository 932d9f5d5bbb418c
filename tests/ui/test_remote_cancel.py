"""A server that takes requests and never answers (tests/remote_mocks.py's hang mode), with a 60 s timeout per
request: a device switch, closing the window and a Test connection waiting on it give the request up at once
(RemoteSession.cancel from the GUI thread) instead of waiting out the timeout and its retries. No timing is
asserted: the waits are generous yet far below the timeout, so they pass only when the request is cancelled."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from remote_mocks import MockServer

from ui.test_remote_device import NUCLEI, SAMPLES, TOKEN, WAIT, _device_menu, _dialog, store  # noqa: F401


@pytest.fixture
def server():
    with MockServer(NUCLEI, name="nuclei", token=TOKEN, device="CPU") as mock:
        yield mock


@pytest.fixture
def window(make_main_window):
    return make_main_window(NUCLEI, device="cpu")


def _silent(qtbot, window, server, sample: Path) -> None:
    """The server's model as the device with a 60 s timeout per request, then a picture whose request the server
    takes and never answers: the inference thread waits in it (without a cancel, for 4 × 60 s and the backoff)."""
    dialog = _dialog(window, server.grpc_url)
    dialog.timeout.setValue(60)
    with qtbot.waitSignal(window.model_changed, timeout=WAIT):
        dialog.ok_button.click()
    before = server.state.requests
    server.state.hang = True
    window.add_paths([sample])
    qtbot.waitUntil(lambda: server.state.requests > before, timeout=WAIT)  # the picture's request is in


def test_switching_to_the_cpu_while_the_server_is_silent_shows_the_local_overlay_at_once(qtbot, window, server):
    sample = SAMPLES / "nuclei_02_dense.png"
    _silent(qtbot, window, server, sample)
    failures: list[str] = []
    window.image_failed.connect(lambda _path, message: failures.append(message))
    cpu = next(a for a in _device_menu(window).actions() if a.data() == "cpu")
    # far below the request's 60 s: only a cancelled request lets the CPU session's load through in time
    with qtbot.waitSignal(window.overlay_shown, timeout=20_000, check_params_cb=lambda shown: shown == str(sample)):
        cpu.trigger()
    assert window.state.model.info.remote is None and window.status.provider.text() == "CPU"
    assert window.state.on_screen.result.mask.any()
    # the given-up request is no failure of the picture nor of the CPU
    assert failures == [] and window.files.status(str(sample)) != "error"
    assert "cancelled" not in window.status.currentMessage()
    assert [a.text() for a in _device_menu(window).actions() if a.isChecked()] == ["CPU"]


def test_closing_the_window_while_the_server_is_silent_ends_the_inference_thread(qtbot, make_main_window, server):
    window = make_main_window(NUCLEI, device="cpu")
    _silent(qtbot, window, server, SAMPLES / "nuclei_01.png")
    rescued: list[int] = []
    # without the cancel, the close would wait out the 60 s timeout and its retries: the server is stopped after
    # 20 s so that the test ends (and fails) instead
    rescue = threading.Timer(20, lambda: (rescued.append(1), server.stop()))
    rescue.start()
    try:
        window.close()
    finally:
        rescue.cancel()
    assert window.worker_thread.isFinished() and not rescued



def test_closing_the_window_during_a_test_connection_to_a_silent_server_is_prompt(qtbot, make_main_window, server,
                                                                                   monkeypatch):
    from app.ui.workers import remote_probe

    monkeypatch.setattr(remote_probe, "TEST_TIMEOUT_S", 60.0)  # a test's own cap (10 s) raised to the request's
    window = make_main_window(NUCLEI, device="cpu")
    dialog = _dialog(window, server.grpc_url)
    dialog.timeout.setValue(60)
    server.state.hang = True
    dialog.test_button.click()
    qtbot.waitUntil(lambda: server.state.requests > 0, timeout=WAIT)  # the test's warm-up request is in
    rescued: list[int] = []
    rescue = threading.Timer(20, lambda: (rescued.append(1), server.stop()))  # else the test would wait 60 s
    rescue.start()
    try:
        window.close()
    finally:
        rescue.cancel()
    probe = next(t for t in window.findChildren(type(window.worker_thread)) if t.objectName() == "remote")
    assert probe.isFinished() and window.worker_thread.isFinished() and not rescued
