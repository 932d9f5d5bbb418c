"""Where a station's frames come from: one interface for a watch folder (app.io.sources.watch), a video file, stream
or camera through OpenCV (app.io.sources.video) and a GenICam camera (app.io.sources.genicam).

A `Source` is iterated: each item is a `Frame` (an id, the time it became complete, and either a file's path or the
decoded pixels), in the order they became complete. Iteration blocks while nothing new has come and ends when
`close()` is called (from any thread) or when the source itself ends (a watched folder removed, a stream over);
`ended` then says why in one line. Nothing here imports Qt or the source packages themselves (watchdog, OpenCV,
harvesters): `app.io.sources.watch`, `video` and `genicam` do, so a station that does not use a kind never loads it.

Drop policy: a file in a watched folder waits its turn (nothing is dropped: `dropped` stays 0). A live camera cannot
wait: frames that come while the station is still judging the previous one are dropped, the newest wins, and each
dropped frame is counted (`dropped`); `NewestWins` is that one-frame mailbox, which the camera sources share
through app.io.sources.capture.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from app.errors import SegLensError

if TYPE_CHECKING:  # numpy only for the type checker: a watch folder's frames carry paths, not pixels
    import numpy as np
    import numpy.typing as npt


class SourceError(SegLensError):
    """A source cannot start (a watched folder that does not exist, a camera that cannot be opened)."""


@dataclass(frozen=True)
class Frame:
    """One item from a source.

    `id`: a file's path relative to the watched folder (POSIX separators), or a camera's frame number; a journal
    keys on it. `timestamp`: `time.time()` when the frame became complete (a file: when the source saw its last
    write or its move into the folder; a camera: its capture). Exactly one of `path` (a file, decoded by the
    consumer) and `pixels` (a decoded camera frame) is set. `size` and `mtime_ns` are a file's, as they were when
    it was judged complete: with `id`, `inode` and `ctime_ns` they say whether it is the same work as before
    (app.runs.station.journal): a writer can set a new part's size and mtime to an old one's (`cp -p`, `rsync
    -t`), not its inode change time, which a rename into the folder sets too. `root`: the folder a file was found
    in (a watched folder): it is read under it, through app.guard.untrusted, a link out of it refused.
    """

    id: str
    timestamp: float
    path: Path | None = None
    pixels: npt.NDArray[np.generic] | None = None
    size: int | None = None
    mtime_ns: int | None = None
    root: Path | None = None
    inode: int | None = None
    ctime_ns: int | None = None

    def __post_init__(self) -> None:
        if (self.path is None) == (self.pixels is None):
            raise ValueError("a Frame carries either a path or pixels")


class Source(Protocol):
    """What a station reads frames from (see the module's docstring)."""

    def __iter__(self) -> Iterator[Frame]:
        """Frames as they become complete; blocks while there is none; ends on `close()` or when the source ends."""
        ...

    def close(self) -> None:
        """Stop: a blocked iteration ends soon after. Idempotent, callable from any thread."""
        ...

    @property
    def dropped(self) -> int:
        """Frames discarded by the drop policy so far (newest wins); always 0 for a watch folder."""
        ...

    @property
    def ended(self) -> str | None:
        """Why the source ended by itself, in one line (None while it runs, or when `close()` ended it)."""
        ...

    @property
    def stalled(self) -> bool:
        """True once a live source has ended because no frame came for its stall limit (the station raises its
        alarm); always False for a watch folder, whose quiet is not a fault."""
        ...

    @property
    def root(self) -> Path | None:
        """The watched folder, whose files the station's journal keeps (and forgets once they are gone); None for
        a source whose frames are not files (a camera, a stream)."""
        ...


class NewestWins:
    """A one-frame mailbox between a camera's capture thread and the station: `put` replaces a frame not yet
    taken (counted in `dropped`), `take` waits for the newest. Thread-safe."""

    def __init__(self) -> None:
        self._frame: Frame | None = None
        self._closed = False
        self._ready = threading.Condition()
        self.dropped = 0

    def put(self, frame: Frame) -> None:
        """Offer a frame; the one still waiting, if any, is dropped and counted."""
        with self._ready:
            if self._frame is not None:
                self.dropped += 1
            self._frame = frame
            self._ready.notify()

    def take(self, timeout: float | None = None) -> Frame | None:
        """The newest frame, waiting up to `timeout` s for one; None on timeout or once closed."""
        with self._ready:
            self._ready.wait_for(lambda: self._frame is not None or self._closed, timeout)
            frame, self._frame = self._frame, None
            return frame

    def close(self) -> None:
        """Wake a waiting `take` (it returns what is left, then None)."""
        with self._ready:
            self._closed = True
            self._ready.notify_all()

