"""The worker pattern, once: a parentless QObject moved onto its own long-lived QThread, and a clean stop."""

from __future__ import annotations

import logging

from PySide6.QtCore import QObject, QThread

log = logging.getLogger(__name__)


def start_worker_thread(worker: QObject, *, name: str, parent: QObject) -> QThread:
    """Move `worker` (created without a parent) onto a new thread named `name`, owned by `parent`, and start it.

    The worker is deleted on its own thread once the thread's event loop has ended.
    """
    thread = QThread(parent)
    thread.setObjectName(name)
    worker.moveToThread(thread)
    thread.finished.connect(worker.deleteLater)
    thread.start()
    return thread


def stop_thread(thread: QThread, *, timeout_ms: int, give_up_ms: int | None = None) -> bool:
    """End the thread's event loop after its current slot and wait for it, for as long as that slot takes.

    A QThread destroyed while it runs aborts the process, and a slot building a session (a TensorRT engine:
    minutes) cannot be interrupted, so this never gives up: it says in the log, every `timeout_ms`, what it is
    waiting for. The window is hidden before, so the user does not wait on a frozen window. `give_up_ms`: for
    tests only, which must end; False when the thread still runs then."""
    waited = 0
    if thread.isRunning():
        thread.quit()
        while not thread.wait(timeout_ms):
            waited += timeout_ms
            log.warning("closing: still waiting for the %s thread to finish its current task", thread.objectName())
            if give_up_ms is not None and waited >= give_up_ms:
                break
    return not thread.isRunning()
