"""The slice preview's worker (SlicePreviewWorker, on its own `slices` thread): a volume's slice read and put
through its window as a picture for the screen, with no model's result — while a 3D model runs over the volume on
the inference thread, or after its run was cancelled. Only the newest request is read (a shared LatestRequest):
paging quickly never builds a backlog."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal, Slot

if TYPE_CHECKING:
    from app.ui.state.slice_preview_messages import SlicePicture, SlicePreviewRequest
    from app.ui.state.view_state import LatestRequest

log = logging.getLogger(__name__)


class SlicePreviewWorker(QObject):
    pictured = Signal(object)  # slice_preview_messages.SlicePicture
    failed = Signal(object)  # slice_preview_messages.SlicePreviewFailed

    def __init__(self, *, latest: LatestRequest) -> None:
        super().__init__()
        self._latest = latest

    @Slot(object)
    def preview(self, request: SlicePreviewRequest) -> None:
        if not self._latest.is_latest(request.request_id):
            return  # the reader paged past it while it waited
        try:
            picture = slice_picture(request)
        except Exception as exc:  # an unreadable slice: said in one line (the slice's own request says it too)
            from app.errors import one_line
            from app.ui.state.slice_preview_messages import SlicePreviewFailed

            self.failed.emit(SlicePreviewFailed(request.request_id, request.path, one_line(exc)))
            return
        self.pictured.emit(picture)


def slice_picture(request: SlicePreviewRequest) -> SlicePicture:
    """The request's slice as the viewer shows it without a result: read (app.io.images.read_slice), its raw
    values through the request's window or the volume's own, as a QImage that owns its pixels."""
    from app.io.images import read_slice
    from app.ui.state.slice_preview_messages import SlicePicture
    from app.ui.widgets.overlay import image_to_qimage

    image = read_slice(request.volume, request.frame)
    window = None if image.raw is None else request.window or image.window
    pixels = image.display(window)
    height, width = pixels.shape[:2]
    return SlicePicture(request.request_id, request.path, request.frame, image_to_qimage(pixels), (width, height),
                        info=dict(image.info), window=window, frames=request.volume.depth)
