"""The display thread: window/level pixels off the GUI thread, latest request wins (no backlog), failures as signals."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from PySide6.QtCore import QObject, Signal, Slot
from PySide6.QtGui import QImage

from app.io.window import apply_window, auto_window
from app.ui.state.messages import ViewKey, WindowFailed, WindowRequest
from app.ui.state.view_state import LatestRequest
from app.ui.workers.threads import start_worker_thread, stop_thread
from app.ui.workers.windowing import WindowingWorker

KEY = ViewKey("big.dcm")


class Window(QObject):
    """Plays the main window's part: sends requests, receives answers on this (the GUI) thread."""

    request = Signal(object)

    def __init__(self, worker: WindowingWorker) -> None:
        super().__init__()
        self.rendered, self.failed, self.threads = [], [], set()
        self.request.connect(worker.render)
        worker.rendered.connect(self.on_rendered)
        worker.failed.connect(self.on_failed)

    @Slot(object)
    def on_rendered(self, windowed) -> None:
        self.rendered.append(windowed)
        self.threads.add(threading.get_ident())

    @Slot(object)
    def on_failed(self, failed: WindowFailed) -> None:
        self.failed.append((failed.request_id, failed.message))


@pytest.fixture
def display(qtbot):
    owner = QObject()
    latest = LatestRequest()
    worker = WindowingWorker(latest=latest)
    thread = start_worker_thread(worker, name="display", parent=owner)
    yield Window(worker), latest
    assert stop_thread(thread, timeout_ms=10_000), "the display thread is still running"


def test_a_fast_drag_draws_the_first_and_the_last_window_not_a_backlog(qtbot, display):
    window, latest = display
    raw = np.random.default_rng(0).normal(0, 1000, (3000, 3000)).astype(np.float32)  # tens of ms per window
    for step in range(50):  # 50 mouse moves arrive faster than one window is made
        window.request.emit(WindowRequest(latest.issue(), KEY, raw, (float(step), 400.0)))
    qtbot.waitUntil(lambda: bool(window.rendered) and window.rendered[-1].request_id == latest.value, timeout=30_000)
    assert len(window.rendered) <= 3, [w.request_id for w in window.rendered]
    last = window.rendered[-1]
    assert last.window == (49.0, 400.0) and last.key == KEY
    assert window.threads == {threading.get_ident()}  # answers arrive on the GUI thread
    pixels = np.frombuffer(last.image.constBits(), np.uint8).reshape(3000, last.image.bytesPerLine())[:, :3000]
    assert last.image.format() == QImage.Format.Format_Grayscale8
    assert np.array_equal(pixels, apply_window(raw, 49.0, 400.0))


def test_an_automatic_window_is_chosen_on_the_display_thread(qtbot, display):
    window, latest = display
    raw = np.linspace(-1000, 3000, 64 * 48, dtype=np.float32).reshape(48, 64)
    window.request.emit(WindowRequest(latest.issue(), KEY, raw, None, invert=True))
    qtbot.waitUntil(lambda: bool(window.rendered), timeout=10_000)
    answer = window.rendered[0]
    assert answer.window == pytest.approx(auto_window(raw))
    pixels = np.frombuffer(answer.image.constBits(), np.uint8).reshape(48, answer.image.bytesPerLine())[:, :64]
    assert np.array_equal(pixels, apply_window(raw, *answer.window, invert=True))


def test_a_failure_comes_back_as_a_signal_and_the_thread_keeps_working(qtbot, display):
    window, latest = display
    window.request.emit(WindowRequest(latest.issue(), KEY, "not an array", (0.0, 1.0)))
    qtbot.waitUntil(lambda: bool(window.failed), timeout=10_000)
    assert window.failed[0][0] == latest.value and "window/level failed" in window.failed[0][1]
    window.request.emit(WindowRequest(latest.issue(), KEY, np.zeros((4, 4), np.float32), (0.0, 1.0)))
    qtbot.waitUntil(lambda: bool(window.rendered), timeout=10_000)
    assert window.rendered[0].request_id == latest.value
