"""The slice preview: a volume's slice on the canvas as a picture alone, with no model's result, while its 3D model
runs (the inference thread is busy for seconds) or after the run was cancelled, so the reader sees and pages the
image at once and the overlay joins it when the result comes. The slice is read on its own `slices` thread
(app.ui.workers.slice_preview, made on first use); each answer carries its request's id, and the window puts on
screen only the newest one, of the slice still wanted, when that slice's own result is not shown."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import QEvent, QObject, QThread, Signal

from app.ui.state.view_state import LatestRequest

if TYPE_CHECKING:
    from app.io.volumes import Volume
    from app.ui.controllers.presenter import Presenter
    from app.ui.state.messages import Window
    from app.ui.state.slice_preview_messages import SlicePicture, SlicePreviewFailed
    from app.ui.state.view_state import ViewState
    from app.ui.widgets.panels import SidePanel
    from app.ui.widgets.status import StatusBar
    from app.ui.widgets.viewer import ImageViewer


class SlicePreview(QObject):
    preview_requested = Signal(object)  # slice_preview_messages.SlicePreviewRequest, to the slices worker
    pictured = Signal(object)  # path (str): a slice of it is on the canvas without a result

    def __init__(self, state: ViewState, *, viewer: ImageViewer, panel: SidePanel, presenter: Presenter,
                 status: StatusBar, busy: Callable[[str], str], parent: QObject | None = None) -> None:
        """`busy(path)`: the side panel's line while the volume `path` has no result (its run's progress, or
        that it was cancelled)."""
        super().__init__(parent)
        self._state, self._viewer, self._panel, self._presenter = state, viewer, panel, presenter
        self._status, self._busy = status, busy
        self._latest = LatestRequest()  # shared with the worker: only the newest request is read
        self._thread: QThread | None = None  # made on first use
        self._worker: QObject | None = None
        self._window: tuple[str, Window | None] | None = None  # the reader's window on a volume, kept for it
        self.on_screen: tuple[str, int] | None = None  # the slice (path, frame) whose picture the canvas shows

    def ask(self, path: str, frame: int, volume: Volume) -> None:
        """Slice `frame` of `path` on the canvas as soon as it is read (unless its result comes first)."""
        from app.ui.state.slice_preview_messages import SlicePreviewRequest

        self._start()
        shown = self._state.shown
        if shown is not None and str(shown.path) == path:  # the reader's window on this volume goes on with it
            self._window = (path, self._state.display_window)
        window = self._window[1] if self._window is not None and self._window[0] == path else None
        self.preview_requested.emit(SlicePreviewRequest(self._latest.issue(), path, frame, volume, window))

    def forget(self) -> None:
        """No preview is wanted now (another picture, another model): one on its way is dropped."""
        self._latest.issue()

    def shows(self, path: str) -> bool:
        """The canvas shows a slice of `path` without a result."""
        return self.on_screen is not None and self.on_screen[0] == path and self._state.on_screen is None

    # -- answers --------------------------------------------------------------------------------------------

    def _wanted(self, request_id: int, path: str, frame: int) -> bool:
        """The newest request's answer, for the slice the reader wants, whose own result is not shown."""
        wanted, shown = self._state.wanted, self._state.shown
        return (self._latest.is_latest(request_id) and wanted is not None and wanted.path == path
                and wanted.frame == frame and (shown is None or shown.key != wanted))

    def _on_picture(self, picture: SlicePicture) -> None:
        if not self._wanted(picture.request_id, picture.path, picture.frame):
            return
        self._state.clear_screen()
        # nothing is shown: a window/level drag must not bring back the picture before (another file's result)
        self._state.shown = None
        self._presenter.model_switching(self._busy(picture.path))  # no overlay, counts or verdict of another
        self._viewer.set_image(picture.image, picture.size)
        self._panel.show_comparison(None, [])  # nor another picture's metrics against its reference
        self._panel.show_image_info(picture.info, picture.window, picture.frame, picture.frames)
        self._status.show_image_size(*picture.size, picture.window)
        self.on_screen = (picture.path, picture.frame)
        self.pictured.emit(picture.path)

    def _on_failed(self, failed: SlicePreviewFailed) -> None:
        wanted = self._state.wanted
        if self._latest.is_latest(failed.request_id) and wanted is not None and wanted.path == failed.path \
                and self._state.on_screen is None:
            self.on_screen = None
            self._state.clear_screen()
            self._presenter.model_switching("")  # no overlay, counts or verdict of the picture before
            self._viewer.clear()
            self._status.showMessage(f"Error: {failed.why}", 15000)

    # -- the thread -----------------------------------------------------------------------------------------

    def _start(self) -> None:
        if self._thread is not None:
            return
        from app.ui.workers.slice_preview import SlicePreviewWorker
        from app.ui.workers.threads import start_worker_thread

        worker = self._worker = SlicePreviewWorker(latest=self._latest)  # held: a parentless QObject
        self.preview_requested.connect(worker.preview)
        worker.pictured.connect(self._on_picture)  # bound methods: run on this thread, not the worker's
        worker.failed.connect(self._on_failed)
        self._thread = start_worker_thread(worker, name="slices", parent=self)
        self._viewer.window().installEventFilter(self)  # the window's close joins the thread

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self._viewer.window() and event.type() == QEvent.Type.Close:
            self.shutdown()
        return False

    def shutdown(self) -> None:
        """Join the slices thread (the window is closing)."""
        from app.ui.workers.threads import stop_thread

        self._latest.issue()
        if self._thread is not None:
            stop_thread(self._thread, timeout_ms=10_000)
