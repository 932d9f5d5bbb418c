"""The station's two helper stages around its inference thread (app.runs.station.run), as the folder run's prefetch and
writer stages are around its own (app.runs.folder.batch): a file is decoded while the frame before it is judged, and the
output folder's pictures are written while the frame after it is judged.

`ReadAhead` iterates a source of files on a helper thread and prepares each frame there (decode, display pixels,
the model's tensor): a file frame lets it take the next frame at once, so that at most one frame is prepared ahead
of the one being judged (memory: one decoded image more). A camera's frames (pixels; the first frame says which
kind the source gives) are taken and prepared on the station's thread, each when the station wants it, as before:
the source's newest-wins mailbox still decides which frame is judged and drops (and counts) the ones in between;
reading a live camera ahead would judge stale frames.

`Finisher` (a station with an output-folder sink) runs what must follow the fast sinks, in frame order, on one
helper thread fed through a bounded queue: the output folder's pictures (a 1080p overlay's blend and PNG encode
outweighs the model's run several times) and then the journal's line. The line is written only once the pictures
are, so the journal's promise holds: a frame whose line is on disk had every sink take it; a kill -9 before the line
makes the restart judge the frame again (the log and MQTT may then see it twice, as for any kill before the line).
The queue holds at most `depth` frames: a folder slower than the model holds the station back rather than growing
memory.

Both run at the niceness they are given (the station's: 0 unless asked; see app.runs.station.run).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

from app.runs.folder.writer import lower_thread_priority

log = logging.getLogger(__name__)

F = TypeVar("F")
T = TypeVar("T")
JOIN_S = 10.0  # the longest close() waits for a helper (a decode or a write in progress finishes first)


@dataclass(frozen=True)
class _Raised:
    """The source raised while iterated on the helper thread: raised again on the consumer's."""

    error: BaseException


_END = object()


class ReadAhead(Generic[F, T]):
    """Items `prepare(frame)` of `source`'s frames in order, prepared on a helper thread (see the module's
    docstring); `ahead(item)` says whether the next frame may be taken before this item is done with. `prepare`
    must not raise (an undecodable file is an item that says so). Iterate once; `close()` after the source's."""

    def __init__(self, source: Iterable[F], prepare: Callable[[F], T], *, ahead: Callable[[T], bool],
                 niceness: int = 0, name: str = "station-read") -> None:
        self._source, self._prepare, self._ahead, self._niceness = source, prepare, ahead, niceness
        self._items: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._wanted = threading.Semaphore(0)  # frames the helper may take from the source: never more than one
        self._closed = threading.Event()
        self._frames: Iterator[F] = iter(())  # the source's iterator, once its first frame said it is files
        self._thread = threading.Thread(target=self._read, name=name, daemon=True)

    def __iter__(self) -> Iterator[T]:
        frames = iter(self._source)
        first = next(frames, None)  # here: a camera's source is then read on this thread alone, not ahead
        if first is None:
            return
        prepared = self._prepare(first)
        if not self._ahead(prepared):
            yield prepared
            for frame in frames:  # no hand-over between threads: the newest frame is taken when wanted
                yield self._prepare(frame)
            return
        self._frames = frames
        self._thread.start()
        self._wanted.release()  # the second file is decoded while the first is judged
        yield prepared
        granted = True  # whether the helper may take the next frame already
        while True:
            if not granted:
                self._wanted.release()
            item = self._items.get()
            if item is _END:
                return
            if isinstance(item, _Raised):
                raise item.error
            prepared = item  # type: ignore[assignment]  # the helper puts only prepared items besides those two
            granted = self._ahead(prepared)
            if granted:
                self._wanted.release()  # the next file is decoded while this one is judged
            yield prepared

    def close(self) -> None:
        """Let the helper end (the source must be closed too, for a helper waiting on it); waits a bounded time."""
        self._closed.set()
        self._wanted.release()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(JOIN_S)

    def _read(self) -> None:
        lower_thread_priority(self._niceness)
        try:
            frames = self._frames
            while True:
                self._wanted.acquire()
                if self._closed.is_set():
                    return
                frame = next(frames, None)
                if frame is None or self._closed.is_set():
                    break  # a frame taken after close() is left unjudged: not journaled, the restart takes it
                self._items.put(self._prepare(frame))
        except BaseException as exc:  # the source failed: the station's thread raises it, as it did reading itself
            self._items.put(_Raised(exc))
        self._items.put(_END)


class Finisher(Generic[T]):
    """`finish(item)` for each item put, in order, on one helper thread, at most `depth` waiting (see the module's
    docstring). An exception from `finish` ends the stage: `put` and `close` raise it on the caller's thread."""

    def __init__(self, finish: Callable[[T], None], *, depth: int = 2, niceness: int = 0,
                 name: str = "station-finish") -> None:
        self._finish, self._niceness = finish, niceness
        self._items: queue.Queue[object] = queue.Queue(maxsize=max(1, depth))
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def put(self, item: T) -> None:
        """Queue `item` (waits while `depth` are waiting); raises what made the stage fail, if it did."""
        self._raise()
        while True:
            try:
                self._items.put(item, timeout=0.2)
                return
            except queue.Full:
                self._raise()  # a stage that died with a full queue would wait forever

    def close(self) -> None:
        """Finish what is queued, then end; raises what made the stage fail, if it did."""
        while self._thread.is_alive():  # a stage that failed takes nothing more: do not wait on its full queue
            try:
                self._items.put(_END, timeout=0.2)
                break
            except queue.Full:
                continue
        self._thread.join()
        self._raise()

    def _raise(self) -> None:
        if self._failure is not None:
            raise self._failure

    def _loop(self) -> None:
        lower_thread_priority(self._niceness)
        while (item := self._items.get()) is not _END:
            try:
                self._finish(item)  # type: ignore[arg-type]  # only items and _END are queued
            except BaseException as exc:  # the journal cannot be written: the station ends, said on its thread
                self._failure = exc
                log.debug("station: the finishing stage failed", exc_info=True)
                return
