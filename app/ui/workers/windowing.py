"""The display thread: window/level pixels for the screen, off the GUI thread and off the inference thread (which
may be busy with a long Run on all).

A right-drag sends a request per mouse move. The worker starts only on the newest (`LatestRequest`, shared with
the window's ViewState) and skips the ones queued behind it, so a fast drag never builds a backlog: the screen
follows the mouse as fast as the pixels can be made. The QImage is made here too (Qt allows QImage, not QPixmap,
off the GUI thread), so the GUI thread only turns it into a pixmap.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal, Slot

from app.ui.state.view_state import LatestRequest

if TYPE_CHECKING:
    from app.ui.state.messages import WindowedImage, WindowRequest

log = logging.getLogger(__name__)


class WindowingWorker(QObject):
    rendered = Signal(object)  # messages.WindowedImage
    failed = Signal(object)  # messages.WindowFailed

    def __init__(self, *, latest: LatestRequest) -> None:
        super().__init__()
        self._latest = latest

    @Slot(object)
    def render(self, request: WindowRequest) -> None:
        if not self._latest.is_latest(request.request_id):
            return  # a newer window was asked for while this one waited: it alone is worth drawing
        try:
            windowed = window_image(request)
        except Exception as exc:
            from app.logs import file_ref, log_exception

            log_exception(log, logging.ERROR, f"window/level for {file_ref(request.key.path)} failed", exc)
            from app.ui.state.messages import WindowFailed

            log.debug("%s is %s", file_ref(request.key.path), request.key.path)
            self.failed.emit(WindowFailed(request.request_id, f"window/level failed: {exc}"))
            return
        self.rendered.emit(windowed)


def window_image(request: WindowRequest) -> WindowedImage:
    """The raw values through the requested window (or an automatic one), as a QImage that owns its pixels."""
    from app.io.window import apply_window, auto_window
    from app.ui.state.messages import WindowedImage
    from app.ui.widgets.overlay import image_to_qimage

    window = request.window or auto_window(request.raw)
    pixels = apply_window(request.raw, *window, invert=request.invert)
    return WindowedImage(request.request_id, request.key, window, image_to_qimage(pixels))
