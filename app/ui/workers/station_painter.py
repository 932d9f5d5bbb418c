"""The Station view's pictures, drawn off the GUI thread and off the station's own: the newest frame with its overlay
(as the output-folder sink draws one: app.io.render.blend_overlay on the display pixels), and a thumbnail of each NG
and REVIEW frame for the strip.

The station hands each judged frame to `Painter.put` on its thread and goes on at once: a one-frame mailbox (the
newest wins, an older one not yet drawn is simply replaced) and a bounded queue of thumbnails (`keep`, the strip's
length) are all that waits. The painter's thread draws at most `max_fps` pictures a second, so a fast line neither
floods the GUI thread with redraws nor grows a queue; the last frame before a pause is always drawn.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import cv2
import numpy as np

from app.io.render import blend_overlay
from app.ui.state.station_messages import StationPicture, StationThumb

if TYPE_CHECKING:
    import numpy.typing as npt

    from app.io.render import Colored
    from app.runs.station.sinks import StationVerdict
    from app.runs.station.sinks.folder import Pictures

log = logging.getLogger(__name__)

SHOWN = ("NG", "REVIEW")  # the verdicts the strip keeps


class Painter:
    """Draws a running station's pictures on its own thread (see the module's docstring) and hands each to `emit`
    (a Qt signal's emit: queued to the GUI thread). `copy_of(verdict, pictures)`: the file the viewer opens for
    an NG or REVIEW frame. `close()` draws what is pending and joins the thread."""

    def __init__(self, *, classes: Sequence[Colored], emit: Callable[[StationPicture], None],
                 copy_of: Callable[[StationVerdict, Pictures], Path | None], max_fps: float = 15.0,
                 max_side: int = 1280, thumb_side: int = 176, keep: int = 24) -> None:
        self._classes, self._emit, self._copy_of = tuple(classes), emit, copy_of
        self._interval, self._max_side, self._thumb_side = 1.0 / max_fps, max_side, thumb_side
        self._ready = threading.Condition()
        self._newest: tuple[StationVerdict, Pictures] | None = None
        self._thumbs: deque[tuple[StationVerdict, npt.NDArray[np.uint8], Path | None]] = deque(maxlen=keep)
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._run, name="station-painter", daemon=True)
        self._thread.start()

    def put(self, verdict: StationVerdict, pictures: Pictures) -> None:
        """The station's thread: the newest frame (an undrawn older one is replaced) and, for NG and REVIEW, a
        coarse copy for its thumbnail (a strided view copied: the frame's full pixels are not kept)."""
        thumb = None
        if verdict.verdict in SHOWN and pictures.pixels is not None:
            thumb = (verdict, thumbnail_source(pictures, self._classes, 2 * self._thumb_side),
                     self._copy_of(verdict, pictures))
        with self._ready:
            self._newest = (verdict, pictures)
            if thumb is not None:
                self._thumbs.append(thumb)
            self._ready.notify()

    def close(self) -> None:
        """Draw what is pending, then end the thread (the station has ended)."""
        self._closing.set()
        with self._ready:
            self._ready.notify()
        self._thread.join()

    def _run(self) -> None:
        while True:
            with self._ready:
                while self._newest is None and not self._closing.is_set():
                    self._ready.wait()
                if self._newest is None:
                    return
                (verdict, pictures), self._newest = self._newest, None
                thumbs = tuple(self._thumbs)
                self._thumbs.clear()
            began = time.monotonic()
            self._emit(self._picture(verdict, pictures, thumbs))
            if not self._closing.is_set():  # at most max_fps pictures a second; the newest waits in the mailbox
                self._closing.wait(max(0.0, self._interval - (time.monotonic() - began)))

    def _picture(self, verdict: StationVerdict, pictures: Pictures,
                 thumbs: tuple[tuple[StationVerdict, npt.NDArray[np.uint8], Path | None], ...]) -> StationPicture:
        try:
            image = None if pictures.pixels is None else overlay_picture(pictures, self._classes, self._max_side)
            made = tuple(StationThumb(v, fit(pixels, self._thumb_side), path) for v, pixels, path in thumbs)
        except Exception as exc:  # a picture that cannot be drawn must not end the painter: the verdict still shows
            log.warning("station view: a frame's picture could not be drawn (%s)", type(exc).__name__)
            log.debug("station view: frame %s not drawn", verdict.frame_id, exc_info=True)
            return StationPicture(verdict, None)
        return StationPicture(verdict, image, made)


def overlay_picture(pictures: Pictures, classes: Sequence[Colored], max_side: int) -> npt.NDArray[np.uint8]:
    """The frame's display pixels, at most `max_side` on their longer side, with its mask blended in (RGB uint8)."""
    pixels, mask = _uint8(pictures.pixels), _mask(pictures)
    full = pixels.shape[:2]
    pixels = fit(pixels, max_side)
    if mask is None or mask.shape[:2] != full:
        return _rgb(pixels)
    if pixels.shape[:2] != full:
        mask = np.asarray(cv2.resize(mask, pixels.shape[1::-1], interpolation=cv2.INTER_NEAREST), dtype=np.uint8)
    return np.ascontiguousarray(blend_overlay(_rgb(pixels), mask, classes), dtype=np.uint8)


def thumbnail_source(pictures: Pictures, classes: Sequence[Colored], side: int) -> npt.NDArray[np.uint8]:
    """A coarse copy of the frame with its overlay, about `side` px on its longer side: strided views of the pixels
    and the mask, so it is cheap on the station's thread and keeps none of the frame's full pixels."""
    pixels, mask = _uint8(pictures.pixels), _mask(pictures)
    step = max(1, max(pixels.shape[:2]) // side)
    small = _rgb(np.ascontiguousarray(pixels[::step, ::step]))
    if mask is None or mask.shape[:2] != pixels.shape[:2]:
        return small
    return np.ascontiguousarray(blend_overlay(small, np.ascontiguousarray(mask[::step, ::step]), classes),
                                dtype=np.uint8)


def fit(pixels: npt.NDArray[np.uint8], side: int) -> npt.NDArray[np.uint8]:
    """`pixels` scaled down (never up) to at most `side` on their longer side."""
    scale = min(1.0, side / max(pixels.shape[:2]))
    if scale >= 1.0:
        return np.ascontiguousarray(pixels)
    size = (max(1, round(pixels.shape[1] * scale)), max(1, round(pixels.shape[0] * scale)))
    return np.ascontiguousarray(cv2.resize(pixels, size, interpolation=cv2.INTER_AREA), dtype=np.uint8)


def _uint8(pixels: npt.NDArray[np.generic] | None) -> npt.NDArray[np.uint8]:
    assert pixels is not None  # the callers ask only for frames that were decoded
    array = np.asarray(pixels)
    return array if array.dtype == np.uint8 else np.clip(array, 0, 255).astype(np.uint8)


def _rgb(pixels: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
    """RGB uint8 (gray made RGB, an alpha channel dropped)."""
    if pixels.ndim == 3 and pixels.shape[2] < 3:
        pixels = pixels[:, :, 0]  # gray with alpha
    if pixels.ndim == 2:
        return np.ascontiguousarray(np.repeat(pixels[:, :, None], 3, axis=2))
    return np.ascontiguousarray(pixels[:, :, :3])


def _mask(pictures: Pictures) -> npt.NDArray[np.uint8] | None:
    result = pictures.result
    mask = None if result is None else result.mask
    return None if mask is None else np.asarray(mask, dtype=np.uint8)
