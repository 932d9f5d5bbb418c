"""Input filters of the main window: files dropped on it open in it; hold Space to peek under the overlay."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QApplication

from app.ui.widgets.lazy_qt import Qt

if TYPE_CHECKING:
    from app.ui.window_parts import WindowParts


# -- files dropped on the window -------------------------------------------------------------------------------

class FileDrops(QObject):
    """Files and folders dragged onto the window open in it (local ones only; a drag of anything else is refused).
    Installed on the window once it is finished (MainWindow.finish): a drop needs its controllers."""

    def __init__(self, window: WindowParts) -> None:
        super().__init__(window)
        self._window = window
        window.installEventFilter(self)

    def eventFilter(self, watched, event) -> bool:
        kind = event.type()
        if kind not in (QEvent.Type.DragEnter, QEvent.Type.Drop):
            return False
        paths = [url.toLocalFile() for url in event.mimeData().urls() if url.isLocalFile()]
        if not paths:
            return False  # the window's own handling: refused
        event.acceptProposedAction()
        if kind == QEvent.Type.Drop:
            self._window.add_paths(paths)
        return True


# -- hold Space to peek ----------------------------------------------------------------------------------------

class PeekFilter(QObject):
    """Hold Space to hide the overlay and see the raw image; release to bring it back (active window only).

    An application-wide event filter, so Space works whichever widget has the focus; `remove` takes it out.
    It is installed once there is an overlay to peek under (`arm`), not at start-up: every event of the
    application then passes through this Python method, and while the worker imports numpy and onnxruntime
    each of those calls waits for the GIL — the first overlay came ~100 ms later with it installed from the
    start (docs/PERFORMANCE.md).
    """

    def __init__(self, window: WindowParts) -> None:
        super().__init__(window)
        self._window = window
        self._armed = False

    def arm(self, *_args) -> None:
        if not self._armed:
            self._armed = True
            application = QApplication.instance()
            assert application is not None  # armed while the viewer runs
            application.installEventFilter(self)

    def remove(self) -> None:
        app = QApplication.instance()
        if app is not None and self._armed:
            app.removeEventFilter(self)
            self._armed = False

    def eventFilter(self, watched, event) -> bool:
        kind = event.type()
        if (kind not in (QEvent.Type.KeyPress, QEvent.Type.KeyRelease) or event.key() != Qt.Key.Key_Space
                or not self._window.isActiveWindow()):
            return False
        from app.ui.controllers.smart import typing

        if typing():  # a space typed in the review note or the file filter is the field's, not a peek
            return False
        if not event.isAutoRepeat():
            wanted = self._window.panel.controls.overlay_wanted()
            self._window.viewer.set_overlay_visible(wanted and kind == QEvent.Type.KeyRelease)
            self._window.volumes.peek(wanted and kind == QEvent.Type.KeyRelease)  # the three planes' too
        return True
