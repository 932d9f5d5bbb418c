"""Typed records between the slice preview (app.ui.controllers.slice_preview) and its worker
(app.ui.workers.slice_preview): a volume's slice as a picture alone, with no model's result, for the canvas while
a 3D model runs over the volume (the inference thread is busy for seconds) or after its run was cancelled. Newest
wins: a request the reader has paged past is not read.

Frozen, so a record handed to another thread cannot change under its reader; Qt-free and numpy-free at run time
(the types are named for the type checker only), as app.ui.state.messages.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from PySide6.QtGui import QImage

    from app.io.volumes import Volume
    from app.ui.state.messages import Window


@dataclass(frozen=True)
class SlicePreviewRequest:
    """Slice `frame` of the volume `path`, through `window` (None: the volume's own)."""

    request_id: int
    path: str
    frame: int
    volume: Volume
    window: Window | None = None


@dataclass(frozen=True)
class SlicePicture:
    """The slice's pixels for the screen (a QImage that owns them), its size (width, height), its facts as the
    side panel shows them, the window its raw values went through (None: 8-bit pixels) and the volume's depth."""

    request_id: int
    path: str
    frame: int
    image: QImage
    size: tuple[int, int]
    info: dict[str, str] = field(default_factory=dict)
    window: Window | None = None
    frames: int = 1


@dataclass(frozen=True)
class SlicePreviewFailed:
    """The slice could not be read: `why` in one line."""

    request_id: int
    path: str
    why: str
