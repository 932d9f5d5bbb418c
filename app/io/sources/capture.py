"""What a camera-like source shares (app.io.sources.video, app.io.sources.genicam): a capture thread that hands its
frames to the newest-wins mailbox (app.io.sources.NewestWins), the iteration that takes the newest, the stall
watch and a `close()` that works from any thread.

A subclass opens its device in its `__init__` (raising SourceError in one line), then implements `_grab` (one
frame as RGB uint8; None when a live source has nothing this time; `EndOfSource` when there is no more) and
`_release`. Frames are numbered in the order read (`Frame.id` "0", "1", …) and stamped with `time.time()` when
read. A live source with no frame for `stall_s` seconds ends: `ended` says it stalled and `stalled` is True (the
station shows the alarm and decides whether to open it again: a stalled line must not look like a quiet one).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import numpy.typing as npt

from app.errors import one_line
from app.io.sources import Frame, NewestWins, SourceError

log = logging.getLogger(__name__)

STALL_S = 5.0  # a live source with no frame for this long has stalled
_WAIT_S = 0.1  # the longest the iterating thread waits between looks at the capture thread (close() wakes it)
_RETRY_S = 0.01  # a live source's empty read is tried again after this long
_JOIN_S = 2.0  # close() waits this long for the capture thread


class EndOfSource(Exception):
    """Raised by `_grab` when there are no more frames: its message is `ended`'s line."""


class CapturedSource:
    """A Source (app.io.sources) fed by a capture thread: see the module's docstring. Iterate once; close when
    done (or use as a context manager)."""

    def __init__(self, name: str, *, kind: str, live: bool, stall_s: float = STALL_S) -> None:
        self.name, self.kind, self.live, self.stall_s = name, kind, live, stall_s
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
        self.frames_read = 0

    # --- what a subclass implements ---

    def _grab(self) -> npt.NDArray[np.uint8] | None:
        """The next frame as RGB uint8 (H×W×3); None: none this time (a live source is asked again); raises
        EndOfSource when there are no more, SourceError when it cannot go on."""
        raise NotImplementedError

    def _release(self) -> None:
        """Let the device go (called once, by whichever thread used it last)."""
        raise NotImplementedError

    def _threaded(self) -> bool:
        """Whether frames come through the capture thread and the mailbox (a live source always does)."""
        return True

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

    @property
    def root(self) -> Path | None:
        """None: a captured frame is pixels, not a file in a folder."""
        return None

    def __iter__(self) -> Iterator[Frame]:
        with self._lock:
            if self._started or self._closing.is_set():
                return
            self._started = True
        yield from self._from_thread() if self._threaded() else self._as_read()

    def close(self) -> None:
        """Stop; a blocked iteration ends within moments. Idempotent, callable from any thread."""
        with self._lock:
            self._closing.set()
            never_started = not self._started
        self._mailbox.close()
        if never_started:
            self._release()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=_JOIN_S)  # a read blocked in a dead stream is left to its own timeout

    def __enter__(self) -> CapturedSource:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # --- unthreaded: read in the iterating thread, nothing dropped ---

    def _as_read(self) -> Iterator[Frame]:
        try:
            while not self._closing.is_set():
                try:
                    pixels = self._grab()
                except (EndOfSource, SourceError) as exc:
                    self._ended = str(exc)
                    return
                if pixels is not None:
                    yield self._frame(pixels)
        finally:
            self._release()

    # --- threaded: the capture thread, the mailbox, the newest taken ---

    def _from_thread(self) -> Iterator[Frame]:
        self._last_frame = time.monotonic()
        self._thread = threading.Thread(target=self._capture, name=f"{self.kind} source", daemon=True)
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
        """The capture thread: grab, hand over; end in one line; release the device when done."""
        try:
            while not self._closing.is_set():
                pixels = self._grab()
                if pixels is None:
                    self._closing.wait(_RETRY_S)  # a live source's hiccup: the iterating thread judges a stall
                    continue
                self._mailbox.put(self._frame(pixels))
                self._last_frame = time.monotonic()
        except (EndOfSource, SourceError) as exc:
            self._reason = str(exc)
        except Exception as exc:  # the capture thread must end the source in one line, not die
            log.warning("%s capture failed: %s", self.kind, one_line(exc, typed=True))
            self._reason = f"{self.name}: capture failed ({one_line(exc, typed=True)})"
        finally:
            self._release()
            self._finished.set()
            self._mailbox.close()

    def _frame(self, pixels: npt.NDArray[np.uint8]) -> Frame:
        frame = Frame(str(self.frames_read), time.time(), pixels=pixels)
        self.frames_read += 1
        return frame

    def _stall(self) -> None:
        self._stalled = True
        self._ended = f"{self.name}: no frame for {self.stall_s:g} s: the {self.kind} stalled"
        log.warning("the %s stalled: no frame for %g s", self.kind, self.stall_s)
        self._closing.set()  # the capture thread stops after its current read, and releases the device
