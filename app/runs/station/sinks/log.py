"""The station's verdict log: an append-only JSONL and CSV file, one line per verdict, rotated by size.

`<folder>/verdicts.jsonl` and `<folder>/verdicts.csv` get one line per verdict (station, id, time as ISO-8601 UTC,
verdict, score, reason, latency_ms). Each line is one `write` on an unbuffered append-only descriptor, so it is in
the file (readable by another process) when `publish` returns; `fsync=True` also forces it to the disk. When a line
would take a file past `max_bytes`, the file is rotated first: `verdicts.jsonl` → `verdicts.1.jsonl` → … →
`verdicts.<keep>.jsonl` (the oldest removed). Each CSV file starts with its header, once.

Names are spelt as the rest of SegLens spells them (app.spelling: a byte of a file name that is not UTF-8 becomes
`\\xNN`, valid UTF-8 always); JSON escapes what it must; a CSV cell holds no raw control character and never a live
spreadsheet formula (app.runs.outputs.report.cell). The id is what the source gives (a path relative to the watched
folder, a frame counter): no patient name is looked up or added.

A failure (disk full, folder gone) never stops the station: the line is lost, counted, and `problem` says so in one
line; each later verdict tries again (the folder is not re-created: a share unmounted under it would be filled in
its place).
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import logging
import math
import os
import threading
from pathlib import Path

from app.errors import one_line
from app.guard.shared import open_append, open_update, remove_under, rename_under
from app.runs.outputs.report import cell
from app.runs.station.sinks import StationVerdict, iso_utc
from app.runs.station.sinks.options import LogSinkOptions
from app.spelling import spelt

log = logging.getLogger(__name__)

STEM = "verdicts"
_MAX_UNLOGGED = 1000  # verdicts remembered whose line a file missed (the station owes fewer)
COLUMNS = ("station", "id", "time", "verdict", "score", "reason", "latency_ms")


def log_record(verdict: StationVerdict) -> dict[str, str | float | None]:
    """The verdict as the log writes it: names spelt (valid UTF-8), time as ISO-8601 UTC."""
    return {
        "station": spelt(verdict.station, controls=False),
        "id": spelt(verdict.frame_id, controls=False),
        "time": iso_utc(verdict.time),
        "verdict": verdict.verdict,
        "score": score_value(verdict.score),
        "reason": spelt(verdict.reason, controls=False),
        "latency_ms": ms_value(verdict.latency_ms),
    }


def finite(value: float | None) -> float | None:
    """`value`, or None when it is not a finite number (JSON has no NaN; a model may score one)."""
    return value if value is None or math.isfinite(value) else None


def score_value(value: float | None) -> float | None:
    """A verdict's score as every sink writes it: to 6 decimals, as the run report does (a float32 score's
    0.5712878704071045 is 0.571288), None when not a finite number."""
    return None if (kept := finite(value)) is None else round(kept, 6)


def ms_value(value: float) -> float | None:
    """A latency as every sink writes it: to the microsecond (3 decimals of a millisecond), None when not finite."""
    return None if not math.isfinite(value) else round(value, 3)


def jsonl_line(verdict: StationVerdict) -> bytes:
    """One JSON line (newline included; a newline inside a name is escaped by JSON)."""
    return (json.dumps(log_record(verdict), ensure_ascii=False, allow_nan=False) + "\n").encode()


def csv_values(verdict: StationVerdict) -> list[str | float | None]:
    """The CSV row's values in COLUMNS' order (strings raw: csv_line spells them as cells)."""
    return [verdict.station, verdict.frame_id, iso_utc(verdict.time), verdict.verdict, score_value(verdict.score),
            verdict.reason, ms_value(verdict.latency_ms)]


def csv_line(values: list[str | float | None]) -> bytes:
    """One CSV row: strings as report cells (no raw control character, no live formula), None empty."""
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerow(
        ["" if v is None else cell(v) if isinstance(v, str) else v for v in values])
    return buffer.getvalue().encode()


CSV_HEADER = csv_line(list(COLUMNS))


class _RotatingFile:
    """One append-only file rotated by size; `header` starts each new file."""

    def __init__(self, path: Path, *, max_bytes: int, keep: int, fsync: bool, header: bytes = b"") -> None:
        self.path = path
        self._max_bytes, self._keep, self._fsync, self._header = max_bytes, keep, fsync, header
        self._fd: int | None = None
        self._size = 0

    def write(self, line: bytes) -> None:
        """Append `line` (rotating first when it would pass max_bytes). OSError when it cannot."""
        if self._fd is not None and not self._still_there():
            self.close()  # removed or moved away (the folder deleted, an outside logrotate): lines would vanish
        if self._fd is None:
            self._open()
        if self._size > len(self._header) and self._size + len(line) > self._max_bytes:
            self._rotate()
        self._write(line)

    def _still_there(self) -> bool:
        assert self._fd is not None
        try:
            return os.path.samestat(os.stat(self.path), os.fstat(self._fd))
        except OSError:
            return False

    def _open(self) -> None:
        """Open the file for appending through app.guard.shared: a symlink, a hard link or a FIFO planted under
        its name is refused (PlantedLink, said in `problem`), never written through; created private (the ids
        are file names, which may name a patient). A line torn by a kill is ended first: the next starts clean."""
        # read and write: its torn end, then closed; both opens in the log folder's descriptor (root=)
        with open_update(self.path, private=True, root=self.path.parent) as handle:
            size = os.fstat(handle.fileno()).st_size
            torn = size > 0 and os.pread(handle.fileno(), 1, size - 1) != b"\n"
        with open_append(self.path, private=True, root=self.path.parent) as handle:
            fd = os.dup(handle.fileno())  # the file object closes its own descriptor
        self._fd, self._size = fd, os.fstat(fd).st_size
        if self._size == 0:
            self._write(self._header)
        elif torn:
            self._write(b"\n")

    def _write(self, data: bytes) -> None:
        assert self._fd is not None
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view, self._size = view[written:], self._size + written
        if self._fsync and data:
            os.fsync(self._fd)

    def _rotate(self) -> None:
        """`.<i>` → `.<i+1>` for the run of rotated files from 1 up (what lies past a gap is no longer this log's),
        the oldest removed once there are `keep`: a rotation costs the files there are, whatever `keep` says."""
        self.close()
        last = 0
        while last < self._keep and os.path.lexists(self._numbered(last + 1)):
            last += 1
        if last == self._keep:  # full (keep 0: the current file itself goes)
            remove_under(self.path.parent, self._numbered(last).name)  # a link planted there: the link itself
            last -= 1
        for i in range(last, -1, -1):
            with contextlib.suppress(FileNotFoundError):
                rename_under(self.path.parent, self._numbered(i).name, self._numbered(i + 1).name)
        self._open()

    def _numbered(self, i: int) -> Path:
        return self.path if i == 0 else self.path.with_name(f"{self.path.stem}.{i}{self.path.suffix}")

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            with contextlib.suppress(OSError):
                os.close(fd)


class LogSink:
    """The JSONL + CSV verdict log in `folder` (module docstring). Thread-safe; `publish` never raises."""

    name = "log"

    def __init__(self, folder: Path, options: LogSinkOptions | None = None) -> None:
        """`options`: the station file's `sinks.log` (None: every default)."""
        given = options or LogSinkOptions()
        if given.max_bytes < 1024 or given.keep < 0:
            raise ValueError("the log's max_bytes must be at least 1024 and keep not negative")
        self._files: list[tuple[_RotatingFile, bool]] = []
        for stem, wanted, header in ((f"{STEM}.jsonl", given.jsonl, b""), (f"{STEM}.csv", given.csv, CSV_HEADER)):
            if wanted:
                self._files.append((_RotatingFile(folder / stem, max_bytes=given.max_bytes, keep=given.keep,
                                                  fsync=given.fsync, header=header), not header))
        self._lock = threading.Lock()
        self._problem: str | None = None
        self.lost = 0  # verdicts that could not be logged (a file missing a line counts once) and were not since
        self._unlogged: dict[StationVerdict, frozenset[int]] = {}  # a verdict → the files that missed its line

    def publish(self, verdict: StationVerdict) -> bool:
        """Append the verdict's line to each file; whether every file has it. A failure is counted and said in
        `problem`, never raised; the station offers the verdict again, and then only the files that missed it get
        its line (a late line, out of order, never a duplicate), and it is no longer counted as lost."""
        with self._lock:
            again = self._unlogged.pop(verdict, None)
            failure: str | None = None
            missed: set[int] = set()
            for index, (file, is_json) in enumerate(self._files):
                if again is not None and index not in again:
                    continue
                line = jsonl_line(verdict) if is_json else csv_line(csv_values(verdict))
                try:
                    file.write(line)
                except OSError as exc:
                    file.close()  # reopened by the next write: the folder may come back
                    failure = f"{file.path.name}: {exc.strerror or one_line(exc)}"  # no path: DEBUG only
                    log.debug("log sink: %s: %s", file.path, exc)
                    missed.add(index)
            if missed:
                self._unlogged[verdict] = frozenset(missed)
                while len(self._unlogged) > _MAX_UNLOGGED:  # verdicts the station no longer offers
                    del self._unlogged[next(iter(self._unlogged))]
            elif again is not None:
                self.lost -= 1  # logged late, not lost
            self._note(failure, counted=again is not None)
            return failure is None

    def _note(self, failure: str | None, *, counted: bool) -> None:
        if failure is None:
            if self._problem is not None:
                log.warning("log sink: writing again (%d verdicts were not logged)", self.lost)
            self._problem = None
            return
        if not counted:
            self.lost += 1
        self._problem = f"log: cannot write {failure} ({self.lost} verdicts not logged)"

    def close(self) -> None:
        """Close the files (each line is already written)."""
        with self._lock:
            for file, _ in self._files:
                file.close()

    @property
    def problem(self) -> str | None:
        """One line while the log cannot be written, else None."""
        return self._problem
