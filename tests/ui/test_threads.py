"""Closing never destroys a running QThread: a slot that outlasts the wait (a long model load) is waited for."""

from __future__ import annotations

import logging
import time

from PySide6.QtCore import QObject, Signal, Slot

from app.ui.workers.threads import start_worker_thread, stop_thread


class _SlowLoader(QObject):
    started = Signal()

    @Slot()
    def load(self) -> None:
        self.started.emit()
        time.sleep(0.6)  # longer than stop_thread's wait: a session build that cannot be interrupted


class _Driver(QObject):
    go = Signal()


def test_a_slot_longer_than_the_wait_is_waited_for_and_said_so(qtbot, caplog):
    owner, loader, driver = QObject(), _SlowLoader(), _Driver()
    thread = start_worker_thread(loader, name="inference", parent=owner)
    driver.go.connect(loader.load)
    with qtbot.waitSignal(loader.started, timeout=5000):
        driver.go.emit()
    with caplog.at_level(logging.WARNING, logger="app.ui.workers.threads"):
        assert stop_thread(thread, timeout_ms=100)
    assert not thread.isRunning()
    assert "still waiting for the inference thread" in caplog.text
