"""A video file, a stream URL or a camera by index as a station's source, through OpenCV's `VideoCapture`.

Each frame becomes a `Frame` (app.io.sources) with `pixels` (RGB, uint8, H×W×3), `id` its number in the stream
(0, 1, 2 … as read: a file's frame index) and `timestamp` the `time.time()` it was captured (a file played on its
clock: when it was due and handed over).

What `target` is: an `int` or a string of digits → a camera by index (V4L2 on Linux, as OpenCV picks); a string
with `://` → a stream (rtsp, http, … through the FFmpeg bundled in opencv-python); anything else → a video file.
Opening fails with one line (SourceError): a missing file, a file FFmpeg cannot read, a stream that does not answer
within `open_timeout_s`, a camera that is absent or busy, frames over the pixel limit (app.io.decoded.pixel_limit,
checked from the size the capture declares, before a frame is read). A URL's password is never in a message.

Pace and drops. A camera or a stream delivers at its own rate; a file, with `realtime` (the default), is played at
its own frame rate, as a camera would deliver it. A capture thread (app.io.sources.capture) reads the frames into
the one-slot mailbox of app.io.sources (`NewestWins`): a frame the station has not taken when the next one comes is
dropped and counted in `dropped`; iteration yields the newest. With `realtime=False` a file is read as fast as it
is consumed, in the iterating thread, every frame in order and none dropped (offline work); `realtime` means
nothing to a live source.

Ending. A file ends after its last frame: `ended` says `end of the video (N frames)`. A frame FFmpeg cannot decode
(a damaged one) inside the count the file declares is skipped and counted (`unreadable`; the ids stay the frames'
numbers in the file), and reading goes on: `end of the video (60 frames, 2 of them unreadable)`. A live source with
no new frame for `stall_s` seconds ends too, `ended` says it stalled and `stalled` is True: the station shows the alarm
and decides whether to open it again (a stalled line must not look like a quiet one). `close()` ends it with
`ended` None.
"""

from __future__ import annotations

import logging
import os
import re
import time
from pathlib import Path

import cv2
import numpy as np
import numpy.typing as npt

from app.io.decoded import pixel_limit
from app.io.limits import megapixels
from app.io.native import quiet_native_stderr
from app.io.sources import SourceError
from app.io.sources.capture import STALL_S, CapturedSource, EndOfSource

log = logging.getLogger(__name__)

# FFmpeg's own lines (`[mjpeg @ 0x…] bad vlc`, `[mov,mp4,… @ 0x…] moov atom not found`) off the terminal: a frame or
# a file it cannot read is SegLens's one line. Read by OpenCV when it first uses FFmpeg; a user's own value wins.
os.environ.setdefault("OPENCV_FFMPEG_LOGLEVEL", "-8")  # AV_LOG_QUIET

OPEN_TIMEOUT_S = 10.0  # the longest a stream is given to answer
MOST_UNREADABLE_IN_A_ROW = 250  # a file whose frames keep failing this long has ended, whatever it declares


def _named(target: str | int | Path) -> tuple[str, str | int, str]:
    """(kind, what VideoCapture opens, the name in messages) for `target` (see the module's docstring)."""
    if isinstance(target, int) or (isinstance(target, str) and target.isdigit()):
        return "camera", int(target), f"camera {int(target)}"
    text = str(target)
    if isinstance(target, str) and "://" in target:
        return "stream", text, re.sub(r"://[^/@]*@", "://***@", text)  # user:password@ hidden
    return "file", text, text


class VideoSource(CapturedSource):
    """A Source (app.io.sources) over a video file, a stream URL or a camera: see the module's docstring.
    Iterate once; close when done (or use as a context manager). Raises SourceError when it cannot be opened."""

    def __init__(self, target: str | int | Path, *, realtime: bool = True, stall_s: float = STALL_S,
                 open_timeout_s: float = OPEN_TIMEOUT_S) -> None:
        kind, opened, name = _named(target)
        super().__init__(name, kind=kind, live=kind != "file", stall_s=stall_s)
        self.realtime = realtime
        self._cap = _open(kind, opened, name, open_timeout_s=open_timeout_s, read_timeout_s=stall_s)
        self.fps = self._cap.get(cv2.CAP_PROP_FPS)
        self.declared = max(0, int(self._cap.get(cv2.CAP_PROP_FRAME_COUNT) or 0)) if kind == "file" else 0
        self.unreadable = 0  # a file's frames inside its declared count that could not be decoded, skipped
        self._failing = 0  # unreadable frames in a row
        self._size_checked = _check_declared_size(self._cap, name)
        self._start: float | None = None  # when a realtime file's first frame was due
        log.debug("video source opened: %s (%s, %.3g fps)", name, self._cap.getBackendName(), self.fps)

    def __enter__(self) -> VideoSource:
        return self

    def _threaded(self) -> bool:
        return self.live or self.realtime

    def _release(self) -> None:
        self._cap.release()

    def _grab(self) -> npt.NDArray[np.uint8] | None:
        ok, image = self._cap.read()
        if not ok:
            if self.live:
                return None
            self._unreadable()  # or EndOfSource
            return None
        self._failing = 0
        if not self._size_checked:  # the capture declared no size: the first frame is checked instead
            _check_size(self.name, image.shape[1], image.shape[0])
            self._size_checked = True
        if not self.live and self.realtime:
            self._pace()
        return _rgb(image, self.name)

    def _unreadable(self) -> None:
        """A file's read failed: a damaged frame inside its declared count is skipped and counted (its number
        kept by the next frame's id), None returned to read on; else the end (EndOfSource)."""
        if self.frames_read < self.declared and self._failing < MOST_UNREADABLE_IN_A_ROW:
            self.frames_read += 1
            self.unreadable += 1
            self._failing += 1
            log.debug("video frame %d of %s could not be decoded", self.frames_read - 1, self.name)
            return None
        unreadable = f", {self.unreadable} of them unreadable" if self.unreadable else ""
        log.debug("end of the video: %s after %d frames%s", self.name, self.frames_read, unreadable)
        raise EndOfSource(f"{self.name}: end of the video ({self.frames_read} frames{unreadable})")

    def _pace(self) -> None:
        """Wait until this frame is due on the file's own clock (close() cuts the wait short)."""
        period = 1.0 / self.fps if 0 < self.fps < 1000 else 1.0 / 30  # a file that declares no rate: 30 fps
        now = time.monotonic()
        if self._start is None:
            self._start = now
        self._closing.wait(max(0.0, self._start + self.frames_read * period - now))


def _open(kind: str, opened: str | int, name: str, *, open_timeout_s: float,
          read_timeout_s: float) -> cv2.VideoCapture:
    """The opened capture, or SourceError in one line."""
    if kind == "file" and not Path(str(opened)).is_file():
        raise SourceError(f"{name}: no such video file")
    with quiet_native_stderr():  # OpenCV's and FFmpeg's own lines: the SourceError's one line says it
        if isinstance(opened, int):
            cap = cv2.VideoCapture(opened)
        else:  # FFmpeg's own timeouts: a stream that does not answer, or stops, must not block for minutes
            cap = cv2.VideoCapture(opened, cv2.CAP_FFMPEG,
                                   [cv2.CAP_PROP_OPEN_TIMEOUT_MSEC, round(open_timeout_s * 1000),
                                    cv2.CAP_PROP_READ_TIMEOUT_MSEC, round(read_timeout_s * 1000)])
    if not cap.isOpened():
        cap.release()
        raise SourceError(f"{name}: {_cannot_open(kind, open_timeout_s)}")
    return cap


def _cannot_open(kind: str, open_timeout_s: float) -> str:
    if kind == "camera":
        return "cannot open the camera (no such device, or in use by another program)"
    if kind == "stream":
        return f"cannot open the stream (refused, not found, or no answer within {open_timeout_s:g} s)"
    return "not a video OpenCV can read (FFmpeg cannot open it)"


def _check_declared_size(cap: cv2.VideoCapture, name: str) -> bool:
    """Refuse a capture whose declared frame size is over the pixel limit (releasing it); False where it declares
    none (the first frame is checked then)."""
    width, height = int(cap.get(cv2.CAP_PROP_FRAME_WIDTH)), int(cap.get(cv2.CAP_PROP_FRAME_HEIGHT))
    if width <= 0 or height <= 0:
        return False
    try:
        _check_size(name, width, height)
    except SourceError:
        cap.release()
        raise
    return True


def _check_size(name: str, width: int, height: int) -> None:
    limit = pixel_limit()
    if width * height > limit:
        raise SourceError(f"{name}: frames too large ({width}×{height} = {megapixels(width * height, beside=limit)}"
                          f" megapixels; the limit is {megapixels(limit)})")


def _rgb(image: cv2.typing.MatLike, name: str) -> npt.NDArray[np.uint8]:
    """OpenCV's BGR (or gray, or BGRA) frame as RGB uint8."""
    if image.dtype != np.uint8:
        raise SourceError(f"{name}: frames of {image.dtype} are not 8-bit: not supported")
    if image.ndim == 2:
        code = cv2.COLOR_GRAY2RGB
    elif image.ndim == 3 and image.shape[2] in (3, 4):
        code = cv2.COLOR_BGR2RGB if image.shape[2] == 3 else cv2.COLOR_BGRA2RGB
    else:
        raise SourceError(f"{name}: frames of shape {image.shape} are not an image")
    return np.asarray(cv2.cvtColor(image, code), dtype=np.uint8)
