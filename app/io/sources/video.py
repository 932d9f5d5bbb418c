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
its own frame rate, as a camera would deliver it. A capture thread reads the frames into the one-slot mailbox of
app.io.sources (`NewestWins`): a frame the station has not taken when the next one comes is dropped and counted in
`dropped`; iteration yields the newest. With `realtime=False` a file is read as fast as it is consumed, in the
iterating thread, every frame in order and none dropped (offline work); `realtime` means nothing to a live source.

Ending. A file ends after its last frame: `ended` says `end of the video (N frames)`. A live source with no new
frame for `stall_s` seconds ends too, `ended` says it stalled and `stalled` is True: the station shows the alarm
and decides whether to open it again (a stalled line must not look like a quiet one). `close()` ends it with
`ended` None.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import cv2
import numpy as np
import numpy.typing as npt

from app.errors import one_line
from app.io.decoded import pixel_limit
from app.io.limits import megapixels
from app.io.native import quiet_native_stderr
from app.io.sources import Frame, NewestWins, SourceError

log = logging.getLogger(__name__)

STALL_S = 5.0  # a live source with no frame for this long has stalled
OPEN_TIMEOUT_S = 10.0  # the longest a stream is given to answer
_WAIT_S = 0.1  # the longest the iterating thread waits between looks at the capture thread (close() wakes it)
_RETRY_S = 0.01  # a live source's failed read is tried again after this long
_JOIN_S = 2.0  # close() waits this long for the capture thread


def _named(target: str | int | Path) -> tuple[str, str | int, str]:
    """(kind, what VideoCapture opens, the name in messages) for `target` (see the module's docstring)."""
    if isinstance(target, int) or (isinstance(target, str) and target.isdigit()):
        return "camera", int(target), f"camera {int(target)}"
    text = str(target)
    if isinstance(target, str) and "://" in target:
        return "stream", text, re.sub(r"://[^/@]*@", "://***@", text)  # user:password@ hidden
    return "file", text, text


class VideoSource:
    """A Source (app.io.sources) over a video file, a stream URL or a camera: see the module's docstring.
    Iterate once; close when done (or use as a context manager). Raises SourceError when it cannot be opened."""

    def __init__(self, target: str | int | Path, *, realtime: bool = True, stall_s: float = STALL_S,
                 open_timeout_s: float = OPEN_TIMEOUT_S) -> None:
        self.kind, opened, self.name = _named(target)
        self.live = self.kind != "file"
        self.realtime, self.stall_s = realtime, stall_s
        self._cap = _open(self.kind, opened, self.name, open_timeout_s=open_timeout_s, read_timeout_s=stall_s)
        self.fps = self._cap.get(cv2.CAP_PROP_FPS)
        self._size_checked = _check_declared_size(self._cap, self.name)
        self._mailbox = NewestWins()
        self._closing = threading.Event()
        self._lock = threading.Lock()
        self._started = False
        self._thread: threading.Thread | None = None
        self._finished = threading.Event()  # the capture thread is done: `_reason` says why
        self._reason: str | None = None
        self._ended: str | None = None
        self._stalled = False
        self._last_frame = time.monotonic()  # when the capture thread last handed a frame over
        self._count = 0  # frames read so far
        log.debug("video source opened: %s (%s, %.3g fps)", self.name, self._cap.getBackendName(), self.fps)

    # --- the Source interface ---

    @property
    def dropped(self) -> int:
        """Frames replaced in the mailbox before the station took them (newest wins)."""
        return self._mailbox.dropped

    @property
    def ended(self) -> str | None:
        return self._ended

    @property
    def stalled(self) -> bool:
        """True once a live source has ended because no frame came for `stall_s` seconds."""
        return self._stalled

    def __iter__(self) -> Iterator[Frame]:
        with self._lock:
            if self._started or self._closing.is_set():
                return
            self._started = True
        if self.live or self.realtime:
            yield from self._from_thread()
        else:
            yield from self._as_read()

    def close(self) -> None:
        """Stop; a blocked iteration ends within moments. Idempotent, callable from any thread."""
        with self._lock:
            self._closing.set()
            never_started = not self._started
        self._mailbox.close()
        if never_started:
            self._cap.release()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=_JOIN_S)  # a read blocked in a dead stream is left to its own timeout

    def __enter__(self) -> VideoSource:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # --- offline: read in the iterating thread ---

    def _as_read(self) -> Iterator[Frame]:
        try:
            while not self._closing.is_set():
                ok, image = self._cap.read()
                if not ok:
                    self._ended = self._end_of_file()
                    return
                yield self._frame(image)
        finally:
            self._cap.release()

    # --- live or realtime: a capture thread, the mailbox, the newest taken ---

    def _from_thread(self) -> Iterator[Frame]:
        self._last_frame = time.monotonic()
        self._thread = threading.Thread(target=self._capture, name=f"video source {self.name}", daemon=True)
        self._thread.start()  # daemon: a consumer that forgets close() must not keep the process alive
        while True:
            frame = self._mailbox.take(timeout=_WAIT_S)
            if frame is not None:
                yield frame
            elif self._closing.is_set():
                return
            elif self._finished.is_set():  # its last frame may have come after the wait: take it first
                if (last := self._mailbox.take(timeout=0)) is None:
                    self._ended = self._reason
                    return
                yield last
            elif self.live and time.monotonic() - self._last_frame >= self.stall_s:
                self._stall()
                return

    def _capture(self) -> None:
        """The capture thread: read, pace a file on its clock, hand over; release the capture when done."""
        start = time.monotonic()
        period = 1.0 / self.fps if 0 < self.fps < 1000 else 1.0 / 30  # a file that declares no rate: 30 fps
        try:
            while not self._closing.is_set():
                ok, image = self._cap.read()
                if not ok:
                    if not self.live:
                        self._reason = self._end_of_file()
                        return
                    self._closing.wait(_RETRY_S)  # a live source's hiccup; the iterating thread judges a stall
                    continue
                if not self.live:
                    self._closing.wait(max(0.0, start + self._count * period - time.monotonic()))
                frame = self._frame(image)
                self._mailbox.put(frame)
                self._last_frame = time.monotonic()
        except SourceError as exc:
            self._reason = str(exc)
        except Exception as exc:  # the capture thread must end the source in one line, not die
            log.warning("video capture failed: %s", one_line(exc, typed=True))
            self._reason = f"{self.name}: capture failed ({one_line(exc, typed=True)})"
        finally:
            self._cap.release()
            self._finished.set()
            self._mailbox.close()

    # --- frames and ends ---

    def _frame(self, image: cv2.typing.MatLike) -> Frame:
        if not self._size_checked:  # the capture declared no size: the first frame is checked instead
            _check_size(self.name, image.shape[1], image.shape[0])
            self._size_checked = True
        frame = Frame(str(self._count), time.time(), pixels=_rgb(image, self.name))
        self._count += 1
        return frame

    def _end_of_file(self) -> str:
        log.debug("end of the video: %s after %d frames", self.name, self._count)
        return f"{self.name}: end of the video ({self._count} frames)"

    def _stall(self) -> None:
        self._stalled = True
        self._ended = f"{self.name}: no frame for {self.stall_s:g} s: the {self.kind} stalled"
        log.warning("the %s stalled: no frame for %g s", self.kind, self.stall_s)
        self._closing.set()  # the capture thread stops after its current read, and releases the capture


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
