"""A watch folder: each image or volume file put into a folder becomes one frame, once it is complete.

A file is complete once it was moved into the folder (a camera's writer that writes `part.png.tmp`, or into a
staging folder inside this one, then renames: a moved-in event), or once its size and modification time have stayed
the same for `settle_s` seconds as seen by this source's own two looks at it (written in place, or moved in from
outside the watched tree, which the file system reports as a new file). So a half-written file is never yielded,
provided the writer never pauses longer than `settle_s` in the middle of a file; an empty file is never complete.
A file changed after it was yielded is yielded again: new work. Its identity is its size, mtime, inode and change
time: `cp -p`, `rsync -t` or a rename can give a new part an old one's size and mtime, not the change time they set
(a chmod alone brings no event here; after a restart it is judged again: twice, never a part missed).
Only regular files are taken: a link (out or in), a FIFO, a device, a socket, a file under a linked folder leading
out are one warning line naming their id, never opened; the station reads under the watched folder (`Frame.root`,
app.guard.untrusted), so a file swapped for a link after this look is refused there too.

Taken: the extensions SegLens reads (app.io.discover's images, DICOM, NIfTI), and other files that turn out to be
DICOM (`IM0001`, UID names: 'DICM' after the preamble, as app.io.discover checks; read only once complete).
Ignored: temporary names (dot-files and anything inside a dot-folder, `*.tmp`, `*.temp`, `*.part`, `*.partial`,
`*.crdownload`, `*.filepart`, `*.swp`, `~` at the end, `~$` at the start), other files, sub-folders unless
`recursive`, and the folders in `exclude` (an output folder inside the watched one).
Files already there at the start are taken too, by name, once they have settled, unless `already_done` says they
were (a station journal, app.runs.station.journal).

Events come from a watchdog Observer thread (inotify on Linux) into a queue read by the iterating thread, which
stats, settles and yields; with `polling` (a network share: inotify does not see another machine's writes), or where
file system events cannot be had (the inotify limits reached), watchdog's PollingObserver looks every `poll_s`.

If the watched folder disappears (removed, renamed, unmounted), the source ends: iteration stops and `ended` says
so in one line. Waiting for it to come back would hide a broken line behind a quiet one; the station decides.
"""

from __future__ import annotations

import logging
import os
import queue
import stat
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver
from watchdog.observers.polling import PollingObserver

from app.errors import one_line
from app.guard.untrusted import is_inside, kind_of
from app.io.dicom import has_dicom_marker
from app.io.discover import IMAGE_EXTENSIONS
from app.io.order import natural_key
from app.io.sources import Frame, SourceError

log = logging.getLogger(__name__)

TEMPORARY_SUFFIXES = (".tmp", ".temp", ".part", ".partial", ".crdownload", ".filepart", ".swp", "~")
TEMPORARY_PREFIXES = ("~$",)  # an Office or Windows owner file beside the one being written
VOLUME_SUFFIXES = (".nii", ".nii.gz")
# The events that say something about a file's content or place: not opened / closed-without-writing (our own
# reads make those), nor attributes.
_EVENTS: list[type[FileSystemEvent]] = [FileCreatedEvent, FileModifiedEvent, FileClosedEvent, FileMovedEvent,
                                        FileDeletedEvent, DirCreatedEvent, DirMovedEvent, DirDeletedEvent]
_ROOT_CHECK_S = 0.5  # how often the watched folder's existence is checked
_MOST_WAIT_S = 0.25  # the longest the iterating thread sleeps between looks (close() wakes it at once)

AlreadyDone = Callable[[Frame], bool]  # a file's frame → processed before (a journal's `has`)
Identity = tuple[int, int, int, int]  # size, mtime_ns, inode, ctime_ns: what makes a file the same work


@dataclass(frozen=True)
class _Event:
    """What the observer thread saw, for the iterating thread. kind: changed, moved_in, gone, folder, root_gone,
    close."""

    kind: str
    path: str
    mono: float
    wall: float


def identity(info: os.stat_result) -> Identity:
    """A file's identity (see the module's docstring)."""
    return info.st_size, info.st_mtime_ns, info.st_ino, info.st_ctime_ns


class _Pending:
    """A file not yet complete: its last identity, when this source first saw it so, when it last changed."""

    __slots__ = ("identity", "moved", "seen_at", "wall")

    def __init__(self, info: os.stat_result, *, seen_at: float, wall: float, moved: bool) -> None:
        self.identity = identity(info)
        self.seen_at, self.wall, self.moved = seen_at, wall, moved


class _Handler(FileSystemEventHandler):
    """Runs on the observer thread: translates watchdog's events and queues them, nothing more."""

    def __init__(self, events: queue.SimpleQueue[_Event], root: str) -> None:
        self._events, self._root = events, root

    def dispatch(self, event: FileSystemEvent) -> None:
        mono, wall = time.monotonic(), time.time()
        src, dest = os.fsdecode(event.src_path), os.fsdecode(event.dest_path)
        kinds: list[tuple[str, str]] = []
        if event.is_directory:
            if event.event_type == "deleted" and src == self._root:
                kinds.append(("root_gone", src))
            elif event.event_type in ("created", "moved") and (dest or src):
                kinds.append(("folder", dest or src))
        elif event.event_type == "moved":
            kinds += [("gone", src)] if src else []
            kinds += [("moved_in", dest)] if dest else []
        elif event.event_type == "deleted":
            kinds.append(("gone", src))
        else:
            kinds.append(("changed", src))
        for kind, path in kinds:
            self._events.put(_Event(kind, path, mono, wall))


class WatchSource:
    """A Source (app.io.sources) over a folder: see the module's docstring. Use as an iterator, close when done
    (or as a context manager). Raises SourceError when `root` is not a folder it can watch."""

    def __init__(self, root: Path, *, settle_s: float = 0.5, recursive: bool = False, polling: bool = False,
                 poll_s: float = 0.5, exclude: Sequence[Path] = (), already_done: AlreadyDone | None = None) -> None:
        self.root = Path(root).absolute()
        if not self.root.is_dir():
            raise SourceError(f"{self.root}: not a folder: there is nothing to watch")
        self.settle_s, self.recursive, self.poll_s = settle_s, recursive, poll_s
        self._excluded = _inside(self.root, exclude)
        self._already_done = already_done
        self._events: queue.SimpleQueue[_Event] = queue.SimpleQueue()
        self._pending: dict[str, _Pending] = {}
        self._yielded: dict[str, Identity] = {}  # id → identity yielded or skipped this session
        self._refused: set[str] = set()  # ids said not to be regular files (said once, until they go)
        self._closing = threading.Event()
        self._lock = threading.Lock()
        self._ended: str | None = None
        self._next_root_check = 0.0
        self.polling = polling
        self._observer = self._start_observer()
        try:
            self._scan(self.root)
        except OSError as exc:
            self.close()
            raise SourceError(f"{self.root}: cannot list the watched folder ({exc.strerror or exc})") from exc

    # --- the Source interface ---

    @property
    def dropped(self) -> int:
        """Always 0: a file waits its turn."""
        return 0

    @property
    def stalled(self) -> bool:
        """Always False: a quiet folder is not a stalled camera (no frame for a while is no fault)."""
        return False

    @property
    def ended(self) -> str | None:
        return self._ended

    def __iter__(self) -> Iterator[Frame]:
        while not self._closing.is_set() and self._ended is None:
            self._drain(self._wait_s())
            for frame in self._complete():
                yield frame
                if self._closing.is_set():
                    return
            self._check_root()

    def close(self) -> None:
        """Stop watching; a blocked iteration ends within moments. Idempotent, callable from any thread."""
        with self._lock:
            if self._closing.is_set():
                return
            self._closing.set()
        self._events.put(_Event("close", "", time.monotonic(), time.time()))
        self._observer.stop()
        if self._observer.is_alive() and self._observer is not threading.current_thread():
            self._observer.join(timeout=5)

    def __enter__(self) -> WatchSource:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # --- the observer ---

    def _start_observer(self) -> BaseObserver:
        if not self.polling:
            try:
                return self._observe(Observer())
            except OSError as exc:  # inotify's limits reached (ENOSPC, EMFILE): poll rather than stop the line
                log.warning("file system events unavailable (%s): the watch folder is polled every %.2g s instead",
                            one_line(exc), self.poll_s)
                self.polling = True
        return self._observe(PollingObserver(timeout=self.poll_s))

    def _observe(self, observer: BaseObserver) -> BaseObserver:
        observer.daemon = True  # a consumer that forgets close() must not keep the process alive
        try:
            observer.schedule(_Handler(self._events, str(self.root)), str(self.root), recursive=self.recursive,
                              event_filter=_EVENTS)
            observer.start()
        except OSError:
            observer.stop()
            raise
        return observer

    # --- the iterating thread: events → pending → complete ---

    def _drain(self, wait_s: float) -> None:
        try:
            event = self._events.get(timeout=wait_s) if wait_s > 0 else self._events.get_nowait()
            while True:
                self._note(event)
                event = self._events.get_nowait()
        except queue.Empty:
            pass

    def _note(self, event: _Event) -> None:
        if event.kind == "root_gone":
            self._end()
        elif event.kind == "folder":
            if self.recursive and self._wanted_folder(event.path):
                self._scan(Path(event.path))
        elif (rel := self._wanted(event.path)) is not None:
            if event.kind == "gone":
                self._pending.pop(rel, None)
                self._yielded.pop(rel, None)
                self._refused.discard(rel)
            else:
                self._changed(rel, wall=event.wall, moved=event.kind == "moved_in")

    def _changed(self, rel: str, *, wall: float, moved: bool) -> None:
        info = self._stat(rel)
        if info is None:
            return
        pending = self._pending.get(rel)
        now = time.monotonic()
        if pending is None:
            if self._yielded.get(rel) == identity(info) and not moved:
                return  # touched, not changed: done already
            self._pending[rel] = _Pending(info, seen_at=now, wall=wall, moved=moved)
        elif moved or pending.identity != identity(info):
            self._pending[rel] = _Pending(info, seen_at=now, wall=wall, moved=moved)

    def _complete(self) -> list[Frame]:
        """The pending files that are complete now, those complete at once by name."""
        now = time.monotonic()
        ready: list[tuple[str, _Pending]] = []
        for rel, pending in list(self._pending.items()):
            if pending.moved or now - pending.seen_at >= self.settle_s:
                info = self._stat(rel)
                if info is None:
                    del self._pending[rel]
                elif identity(info) != pending.identity or info.st_size == 0:
                    self._pending[rel] = _Pending(info, seen_at=now, wall=time.time(), moved=False)
                else:
                    del self._pending[rel]
                    ready.append((rel, pending))
        ready.sort(key=lambda item: natural_key(item[0]))
        return [frame for rel, pending in ready if (frame := self._frame(rel, pending)) is not None]

    def _frame(self, rel: str, pending: _Pending) -> Frame | None:
        if self._yielded.get(rel) == pending.identity:
            return None
        self._yielded[rel] = pending.identity
        path = self.root / rel
        if not _known_name(rel) and not has_dicom_marker(path):  # another name: taken only if it is DICOM
            return None
        size, mtime_ns, inode, ctime_ns = pending.identity
        frame = Frame(rel, pending.wall, path=path, size=size, mtime_ns=mtime_ns, root=self.root, inode=inode,
                      ctime_ns=ctime_ns)
        if self._already_done is not None and self._already_done(frame):
            log.debug("already done: %s", rel)
            return None
        log.debug("complete: %s", rel)
        return frame

    def _wait_s(self) -> float:
        now = time.monotonic()
        wait = min(_MOST_WAIT_S, max(0.0, self._next_root_check - now))
        for pending in self._pending.values():
            wait = min(wait, 0.0 if pending.moved else max(0.0, pending.seen_at + self.settle_s - now))
        return wait

    # --- the folder ---

    def _scan(self, folder: Path) -> None:
        """Files already in `folder` (the start, or a folder moved in), by name: pending like any new file."""
        now, wall = time.monotonic(), time.time()
        for path in sorted(self._listing(folder), key=lambda p: natural_key(p.as_posix())):
            rel = self._wanted(str(path))
            info = self._stat(rel) if rel is not None else None
            if rel is not None and info is not None and rel not in self._pending:
                done_at = min(wall, max(info.st_mtime, _changed_at(info)))  # complete before: last write or move
                self._pending[rel] = _Pending(info, seen_at=now, wall=done_at, moved=False)

    def _listing(self, folder: Path) -> Iterator[Path]:
        if not self.recursive:
            with os.scandir(folder) as entries:
                yield from (Path(entry.path) for entry in entries)
            return
        for parent, dirs, names in os.walk(folder, onerror=lambda exc: log.debug("cannot list: %s", exc)):
            dirs[:] = [d for d in dirs if self._wanted_folder(os.path.join(parent, d))]
            yield from (Path(parent, name) for name in names)

    def _wanted(self, path: str) -> str | None:
        """`path`'s id (relative to the root, POSIX) unless its name or folder rules it out (see the module's
        docstring), else None."""
        try:
            rel = Path(path).relative_to(self.root)
        except ValueError:
            return None
        parts = rel.parts
        if not parts or (len(parts) > 1 and not self.recursive) or path.startswith(self._excluded):
            return None
        name = parts[-1].lower()
        if any(part.startswith(".") for part in parts) or name.endswith(TEMPORARY_SUFFIXES) or \
                name.startswith(TEMPORARY_PREFIXES):
            return None
        return rel.as_posix()

    def _wanted_folder(self, path: str) -> bool:
        try:
            rel = Path(path).relative_to(self.root)
        except ValueError:
            return False
        return not any(part.startswith(".") for part in rel.parts) and not (path + os.sep).startswith(self._excluded)

    def _stat(self, rel: str) -> os.stat_result | None:
        """The file's own stat (a link is not followed) if it is a regular file in the watched folder, else None:
        a link, a FIFO, a device or a socket is never opened, and said once in a warning naming its id."""
        path = self.root / rel
        try:
            info = os.lstat(path)
        except OSError:
            return None
        if stat.S_ISDIR(info.st_mode):
            return None  # a sub-folder (not recursive), or one just made
        what = kind_of(info.st_mode)
        if what is None and "/" in rel and not is_inside(self.root, path):
            what = "a symbolic link"  # a folder on its way links out of the watched one
        if what is None:
            return info
        if rel not in self._refused:
            self._refused.add(rel)
            log.warning("watch folder: %s is not judged (not a regular file: %s)", rel, what)
        return None

    def _check_root(self) -> None:
        now = time.monotonic()
        if now >= self._next_root_check:
            self._next_root_check = now + _ROOT_CHECK_S
            if not self.root.is_dir():
                self._end()

    def _end(self) -> None:
        if self._ended is None and not self._closing.is_set():
            log.warning("the watched folder is gone: the watch-folder source ends")
            log.debug("watched folder gone: %s", self.root)
            self._ended = f"{self.root}: the watched folder is gone (removed, renamed or unmounted): watching ended"


def _inside(root: Path, exclude: Sequence[Path]) -> tuple[str, ...]:
    """The excluded folders inside `root` (as path prefixes); one around it (the station's output folder holding
    the watched one) leaves nothing out, and `root` itself is refused: every file would be left out, silently."""
    top = os.path.normpath(root)
    inside: list[str] = []
    for folder in (os.path.normpath(Path(p).absolute()) for p in exclude):
        if folder == top:
            raise SourceError(f"{root}: the watched folder is the output folder: its own pictures would come back "
                              "as parts; give an output folder outside it (or in a sub-folder of it)")
        if folder.startswith(top + os.sep):
            inside.append(folder + os.sep)
    return tuple(inside)


def _known_name(rel: str) -> bool:
    """An image or volume extension SegLens reads (anything else is looked into for DICOM)."""
    name = rel.rsplit("/", 1)[-1].lower()
    return os.path.splitext(name)[1] in IMAGE_EXTENSIONS or name.endswith(VOLUME_SUFFIXES)


def _changed_at(info: os.stat_result) -> float:
    """When the inode last changed (a rename in sets it on POSIX); Windows' st_ctime: the creation, before writes."""
    return info.st_mtime if os.name == "nt" else info.st_ctime
