"""The worker pattern, once: a parentless QObject moved onto its own long-lived QThread, and a clean stop."""

from __future__ import annotations

from PySide6.QtCore import QObject, QThread


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


def stop_thread(thread: QThread, *, timeout_ms: int) -> bool:
    """End the thread's event loop after its current slot and wait for it; False if it is still running."""
    if thread.isRunning():
        thread.quit()
        thread.wait(timeout_ms)
    return not thread.isRunning()
