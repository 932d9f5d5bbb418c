"""A station's journal: which files it has processed, so each is processed exactly once, across restarts too.

`<out>/station-journal.jsonl` holds one JSON line per processed file: its id (the path relative to the watched
folder), size, mtime_ns, inode and ctime_ns (app.io.sources.watch: a writer can give a new part an old one's size
and mtime, not its inode change time), status (the verdict: "OK", "REVIEW", "NG", or why it could not be judged) and
the time the line was written. Each line is written with one `write` on an append-only descriptor and fsync'd before
`record` returns, so the line is the commit: a file whose line is there is never processed again; a file whose line
is not there (the process was killed, even with kill -9, while it was being processed) is processed again at the
restart. A torn last line (killed in the middle of writing it: no newline) is not a record; it is cut off when the
journal is opened, so the next line starts clean. A sink that publishes a verdict before its line is written may
therefore see a file twice after a kill, never zero times; the station writes the line after its sinks.

The same id with another size, mtime_ns, inode or ctime_ns is another file that took the old one's name (a part
re-inspected, a camera restarting its numbering): new work, processed and recorded again; the latest line for an id
is what counts.

Bounded, on disk and in memory. In memory the journal keeps, per id, a 64-bit hash of the id and its size and
mtime_ns (≈ 0.1 kB an id, not the record: a shift's 100,000 parts are ≈ 10 MB, not 50), which is all `done` needs.
Once the file holds more than `max_entries` lines, it is compacted into one line per id (the latest), leaving out the
ids that `keep` says are gone (files no longer in the watched folder: a file the line deleted or moved away does not
come back as the same work, the same name, size and mtime_ns, unless it is moved back unchanged, which is then judged
again), and written through a temporary file, fsync'd and renamed over the old one, so a kill during compaction
leaves the old journal or the new one, both whole. `prune(keep)` (the station, once its watch source is open) does
the same at once when any remembered id is gone, and keeps `keep` for later compactions: so the journal holds the
files still in the folder plus at most `max_entries` lines more. The bound is `max_entries` or twice the live ids,
whichever is larger (a folder that keeps every file needs every id remembered).

One station per output folder: the station holds app.runs.outputs.lock's OutputLock; the journal does not lock by
itself.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.errors import OutputError
from app.guard.shared import TEMPORARY_PREFIX, atomic_write, open_append, open_update, remove_under
from app.guard.untrusted import STATE_FILE_LIMIT, TooLarge, read_untrusted
from app.io.files import sync_folder
from app.io.sources import Frame
from app.spelling import counted

log = logging.getLogger(__name__)

JOURNAL_NAME = "station-journal.jsonl"


@dataclass(frozen=True)
class JournalEntry:
    """One processed file: its id, its size and mtime_ns when processed, its status and the time of the record."""

    id: str
    size: int
    mtime_ns: int
    status: str
    time: float
    inode: int | None = None  # None in a line written before they were recorded: that file is judged again once
    ctime_ns: int | None = None


@dataclass(frozen=True)
class JournalRead:
    """What a journal file holds: its whole records, the byte length they fill, whether a torn last line followed
    them, and how many damaged lines elsewhere were skipped."""

    entries: list[JournalEntry]
    whole_bytes: int
    torn: bool
    damaged: int


def read_journal(path: Path) -> JournalRead:
    """The records of the journal at `path` (none when there is no file), without changing it. OSError when it
    cannot be read (a FIFO, a folder or a symlink under its name: app.guard.untrusted, rooted in its folder)."""
    try:
        data = read_untrusted(path, limit=STATE_FILE_LIMIT, root=path.parent)
    except FileNotFoundError:
        return JournalRead([], 0, False, 0)
    return _records(data)


def _records(data: bytes) -> JournalRead:
    whole = data.rfind(b"\n") + 1  # a last line without its newline was being written when the process died
    entries: list[JournalEntry] = []
    damaged = 0
    for line in data[:whole].splitlines():
        entry = _parse(line)
        if entry is None:
            damaged += 1
        else:
            entries.append(entry)
    return JournalRead(entries, whole, whole < len(data), damaged)


class StationJournal:
    """The journal in `out_dir` (see the module's docstring), open for appending. Raises OutputError when the folder
    or the journal cannot be read or written."""

    def __init__(self, out_dir: Path, *, max_entries: int = 10_000,
                 keep: Callable[[str], bool] | None = None) -> None:
        self.path = Path(out_dir) / JOURNAL_NAME
        self.max_entries = max_entries
        self._keep = keep
        self._lock = threading.Lock()
        self._latest: dict[int, int] = {}  # _key(id) → _identity(…) of its latest record
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._remove_leftovers()
            found = self._read_and_mend()
            self._fd = self._open()
        except OSError as exc:
            raise OutputError(f"{self.path}: cannot open the station journal ({exc.strerror or exc})") from exc
        self.torn, self.damaged = found.torn, found.damaged
        if found.damaged:
            log.warning("station journal: %s skipped; their files will be processed again",
                        counted(found.damaged, "damaged line"))
        for entry in found.entries:
            self._latest[_key(entry.id)] = _entry_identity(entry)
        self._lines = len(found.entries) + found.damaged
        self._limit = max(max_entries, 2 * len(self._latest))

    def __len__(self) -> int:
        """How many ids the journal remembers."""
        return len(self._latest)

    @property
    def lines(self) -> int:
        """How many lines the file holds now (records, superseded ones included)."""
        return self._lines

    def done(self, file_id: str, size: int, mtime_ns: int, *, inode: int | None = None,
             ctime_ns: int | None = None) -> bool:
        """Whether this file (this id with this size, mtime_ns, inode and ctime_ns) was processed already (any
        thread)."""
        return self._latest.get(_key(file_id)) == _identity(size, mtime_ns, inode, ctime_ns)

    def has(self, frame: Frame) -> bool:
        """Whether this file's frame was processed already (a watch source's `already_done`; any thread)."""
        if frame.size is None or frame.mtime_ns is None:
            return False
        return self.done(frame.id, frame.size, frame.mtime_ns, inode=frame.inode, ctime_ns=frame.ctime_ns)

    def prune(self, keep: Callable[[str], bool]) -> int:
        """Forget the ids `keep` says are gone (their files are no longer in the watched folder), compacting the file
        at once if any is, and use `keep` at every later compaction; how many were forgotten. A failed compaction
        forgets nothing (logged; the journal goes on)."""
        with self._lock:
            self._keep = keep
            before = len(self._latest)
            try:
                gone = any(not keep(entry.id) for entry in self._latest_entries())
            except OSError as exc:
                log.warning("station journal: cannot be read back to forget gone files (%s)", exc.strerror or exc)
                return 0
            if gone:
                self._compact()
            return before - len(self._latest)

    def record(self, frame: Frame, status: str, *, at: float | None = None) -> JournalEntry:
        """Commit `frame` as processed with `status`: the line is on disk (fsync'd) when this returns."""
        if frame.size is None or frame.mtime_ns is None:
            raise ValueError(f"{frame.id}: a journal records files (with a size and mtime_ns), not camera frames")
        if not status or "\n" in status or "\r" in status:
            raise ValueError(f"{frame.id}: a journal status is one non-empty line, not {status!r}")
        entry = JournalEntry(frame.id, frame.size, frame.mtime_ns, status, time.time() if at is None else at,
                             frame.inode, frame.ctime_ns)
        with self._lock:
            self._append(_line(entry))
            self._latest[_key(entry.id)] = _entry_identity(entry)
            self._lines += 1
            if self._lines > self._limit:
                self._compact()
        return entry

    def close(self) -> None:
        """Close the file (every record is on disk already). Idempotent."""
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

    def __enter__(self) -> StationJournal:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _latest_entries(self) -> list[JournalEntry]:
        """The latest record of each id, from the file (memory holds only their hashes), in the order of those
        records."""
        latest: dict[str, JournalEntry] = {}
        for entry in read_journal(self.path).entries:
            latest.pop(entry.id, None)  # re-inserted last: the order of the latest records
            latest[entry.id] = entry
        return list(latest.values())

    def _read_and_mend(self) -> JournalRead:
        """The journal's records, read through the descriptor that mends it: a torn last line is cut off, so that
        the next record does not continue it. Opened through app.guard.shared: a symlink, a hard link or a FIFO
        planted under the name is refused (PlantedLink), never truncated or appended to; created private (the
        ids are file names, which may name a patient)."""
        with open_update(self.path, private=True, root=self.path.parent) as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > STATE_FILE_LIMIT:
                raise TooLarge(self.path, size, STATE_FILE_LIMIT)
            found = _records(handle.read(STATE_FILE_LIMIT))
            if found.torn:
                handle.truncate(found.whole_bytes)
        return found

    def _open(self) -> int:
        created = not os.path.lexists(self.path)
        # the journal writes on a descriptor of its own; opened in the station's out folder's descriptor (root=)
        with open_append(self.path, private=True, root=self.path.parent) as handle:
            fd = os.dup(handle.fileno())
        if created:
            sync_folder(self.path.parent)  # the new file's name must survive a crash as its lines do
        return fd

    def _append(self, data: bytes) -> None:
        if self._fd < 0:
            raise OutputError(f"{self.path}: the station journal is closed")
        start = os.lseek(self._fd, 0, os.SEEK_END)
        try:
            written = 0
            while written < len(data):
                written += os.write(self._fd, data[written:])
            os.fsync(self._fd)
        except OSError as exc:  # a full disk: take back the part written, or the next line would continue it
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, start)
            raise OutputError(f"{self.path}: cannot write the station journal ({exc.strerror or exc})") from exc

    def _compact(self) -> None:
        """Rewrite the journal as one line per id still wanted (see the module's docstring)."""
        try:
            kept = [entry for entry in self._latest_entries() if self._keep is None or self._keep(entry.id)]
            data = b"".join(_line(entry) for entry in kept)
            # replaces a planted link, never follows it; the temporary and the rename in one pinned folder
            atomic_write(self.path, data, private=True, durable=True, root=self.path.parent)
            sync_folder(self.path.parent)
            os.close(self._fd)
            self._fd = self._open()
        except (OSError, OutputError) as exc:
            log.warning("station journal: compaction failed (%s); it goes on growing",
                        getattr(exc, "strerror", None) or exc)
            self._limit = self._lines * 2  # try again later, not at every record
            return
        log.debug("station journal compacted: %d lines → %d", self._lines, len(kept))
        self._latest = {_key(entry.id): _entry_identity(entry) for entry in kept}
        self._lines = len(kept)
        self._limit = max(self.max_entries, 2 * len(kept))

    def _remove_leftovers(self) -> None:
        """Temporaries of a compaction that was killed before its rename."""
        for leftover in self.path.parent.glob(f"{TEMPORARY_PREFIX}{self.path.name}.*.tmp"):
            with contextlib.suppress(OSError, ValueError):
                remove_under(self.path.parent, leftover.name)


def _key(file_id: str) -> int:
    """A 64-bit hash of the id (two ids alike in their 64 bits: ~1 in 10^9 for a million ids, and then only a file
    of the same size and mtime_ns too would be taken as done)."""
    data = file_id.encode("utf-8", "surrogateescape")  # os.fsdecode's surrogates: a name that is no UTF-8
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


def _identity(size: int, mtime_ns: int, inode: int | None, ctime_ns: int | None) -> int:
    """Size and mtime_ns exactly (no collision: a changed file is always new work) and a 64-bit hash of inode and
    ctime_ns, in one int (≈ 50 bytes)."""
    extra = hashlib.blake2b(f"{inode}:{ctime_ns}".encode(), digest_size=8).digest()
    return (size << 128) | ((mtime_ns & ((1 << 64) - 1)) << 64) | int.from_bytes(extra, "little")


def _entry_identity(entry: JournalEntry) -> int:
    return _identity(entry.size, entry.mtime_ns, entry.inode, entry.ctime_ns)


def _line(entry: JournalEntry) -> bytes:
    # ASCII JSON: a name that is no valid UTF-8 (os.fsdecode's surrogates) and a newline in a name are escaped
    record: dict[str, object] = {"id": entry.id, "size": entry.size, "mtime_ns": entry.mtime_ns,
                                 "status": entry.status, "time": round(entry.time, 6)}
    if entry.inode is not None and entry.ctime_ns is not None:
        record.update(ino=entry.inode, ctime_ns=entry.ctime_ns)
    return json.dumps(record, separators=(",", ":")).encode("ascii") + b"\n"


def _parse(line: bytes) -> JournalEntry | None:
    try:
        record: Any = json.loads(line)
        entry = JournalEntry(record["id"], record["size"], record["mtime_ns"], record["status"], float(record["time"]),
                             record.get("ino"), record.get("ctime_ns"))
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    fields_ok = (isinstance(entry.id, str) and isinstance(entry.status, str) and isinstance(entry.size, int)
                 and isinstance(entry.mtime_ns, int) and isinstance(entry.inode, int | None)
                 and isinstance(entry.ctime_ns, int | None))
    return entry if fields_ok else None
