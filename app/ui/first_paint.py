"""Work that waits for the window's first paint: at start-up the model's load (the worker's imports hold the GIL
~150 ms, and painting needs it too — on X the window stayed black ~0.1 s after it was mapped)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtWidgets import QWidget

if TYPE_CHECKING:
    from PySide6.QtGui import QWindow

FIRST_PAINT_WAIT_MS = 500  # at most: a window never exposed (started minimised, a platform without expose events)


def after_first_paint(window: QWidget, then: Callable[[], None], *, wait_ms: int = FIRST_PAINT_WAIT_MS) -> None:
    """Call `then` once, from the event loop, after the shown `window`'s first expose — its first paint is done
    while that event is handled, and a timer posted from there runs after it — or after `wait_ms` at the latest.
    A timer posted right after show() ran before the X server's expose arrived: the load came first."""
    done: list[bool] = []

    def once() -> None:
        if not done:
            done.append(True)
            then()

    handle = window.windowHandle()
    if handle is None or handle.isExposed():
        QTimer.singleShot(0, once)
        return
    handle.installEventFilter(_FirstExpose(once, parent=window))
    QTimer.singleShot(wait_ms, once)


class _FirstExpose(QObject):
    """Installed on the window's QWindow (its few events, not the application's): posts `then` after the first
    expose that shows the window, and removes itself."""

    def __init__(self, then: Callable[[], None], *, parent: QObject) -> None:
        super().__init__(parent)
        self._then = then

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Expose and cast("QWindow", watched).isExposed():  # only a QWindow is exposed
            watched.removeEventFilter(self)
            QTimer.singleShot(0, self._then)
        return False
