"""The MQTT sink's on-disk buffer: every verdict not yet acknowledged by the broker, in order, bounded.

`<out>/mqtt-buffer.jsonl` is append-only: `{"seq": n, "payload": {...}}` when a verdict is taken, `{"ack": n}` when
the broker has acknowledged every verdict up to n (PUBACK, QoS 1), `{"drop": n}` when verdict n was dropped because
the buffer was full. Read back at start, what is neither acknowledged nor dropped is sent again, in order, first;
the sequence numbers go on from the last one (the payload's `seq`: a subscriber drops a seq it has seen, the
duplicates QoS 1 allows). Each line is one `write` on an append-only descriptor (a kill leaves whole lines and at
most one torn last line, skipped); `fsync=True` forces each to the disk too. The file is compacted (the pending
lines and one ack, through a temporary file renamed over it) whenever it passes its bound while the backlog is
small, so it stays bounded in bytes too.

Bounded: more than `max_count` verdicts or `max_bytes` of their lines pending → the oldest not yet handed to the
client is dropped and counted (`dropped`); those handed over (at most the client's window) are in flight already.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from app.errors import OutputError
from app.guard.shared import atomic_write, open_append, open_update
from app.guard.untrusted import STATE_FILE_LIMIT, TooLarge

log = logging.getLogger(__name__)

BUFFER_NAME = "mqtt-buffer.jsonl"


@dataclass(frozen=True)
class Pending:
    """One verdict waiting for its PUBACK: its sequence number and its JSON payload (the seq inside)."""

    seq: int
    payload: bytes
    station: str


class OutBuffer:
    """The buffer (module docstring). Not thread-safe: the MQTT sink holds its lock around every call."""

    def __init__(self, path: Path, *, max_count: int, max_bytes: int, fsync: bool = False) -> None:
        if max_count < 1 or max_bytes < 1024:
            raise ValueError("the MQTT buffer needs max_count >= 1 and max_bytes >= 1024")
        self.path, self._max_count, self._max_bytes, self._fsync = path, max_count, max_bytes, fsync
        self.entries: deque[Pending] = deque()
        self.sent = 0  # how many of the first entries are handed to the client (in flight)
        self.dropped = 0
        self.disk_problem: str | None = None  # one line while the buffer's file cannot be written
        self.last_written = True  # whether the last `add` wrote its line (False: in memory only)
        self._acked: set[int] = set()  # acknowledged out of order, ahead of the first entry
        self._bytes = 0
        self._done = 0  # every seq <= this is acknowledged or dropped
        self._next = 1
        self._load()
        self._fd = _open_append(path)
        self._compact_if_large(at_start=True)

    def add(self, payload: dict[str, object], station: str) -> Pending:
        """Take a verdict's payload (its `seq` set here), write its line; drop the oldest unsent when full."""
        seq = self._next
        self._next += 1
        body = {**payload, "seq": seq}
        entry = Pending(seq, json.dumps(body, ensure_ascii=False, allow_nan=False).encode(), station)
        self.last_written = self._append({"seq": seq, "station": station, "payload": body})
        self.entries.append(entry)
        self._bytes += len(entry.payload)
        self._bound()
        return entry

    def write_late(self, seq: int) -> bool:
        """Write the line of verdict `seq`, which `add` could not write (a full disk); whether the buffer has it
        now: written, or no longer pending (acknowledged by the broker, or dropped and counted)."""
        entry = next((entry for entry in self.entries if entry.seq == seq), None)
        if entry is None:
            return True
        return self._append({"seq": seq, "station": entry.station, "payload": json.loads(entry.payload)})

    def next_unsent(self) -> Pending | None:
        """The oldest verdict not yet handed to the client, marked as handed; None when all are."""
        if self.sent >= len(self.entries):
            return None
        entry = self.entries[self.sent]
        self.sent += 1
        return entry

    def ack(self, seq: int) -> None:
        """The broker acknowledged `seq`: forget every leading verdict acknowledged so far."""
        self._acked.add(seq)
        done = None
        while self.entries and self.entries[0].seq in self._acked:
            entry = self.entries.popleft()
            self._acked.discard(entry.seq)
            self._bytes -= len(entry.payload)
            self.sent -= 1
            done = entry.seq
        if done is not None:
            self._done = done
            # an ack not on disk is sent again after a restart: a duplicate, never a loss
            if self._append({"ack": done}):
                self._compact_if_large()

    def discard(self, seq: int) -> None:
        """Drop verdict `seq` (handed to the client, which refused it): written as dropped and counted, so it is
        neither waited for nor sent again after a restart."""
        index = next((i for i, entry in enumerate(self.entries) if entry.seq == seq), None)
        if index is None:
            return
        entry = self.entries[index]
        del self.entries[index]
        self._bytes -= len(entry.payload)
        self.sent -= 1 if index < self.sent else 0
        self.dropped += 1
        self._append({"drop": seq})
        if self.entries and self.entries[0].seq in self._acked:  # those after it were acknowledged already
            self.ack(self.entries[0].seq)

    def close(self) -> None:
        """Close the file (its lines are already written)."""
        with contextlib.suppress(OSError):
            os.close(self._fd)

    def _bound(self) -> None:
        while (len(self.entries) > self._max_count or self._bytes > self._max_bytes) \
                and self.sent < len(self.entries):
            entry = self.entries[self.sent]
            del self.entries[self.sent]
            self._bytes -= len(entry.payload)
            self.dropped += 1
            self._append({"drop": entry.seq})

    def _append(self, record: dict[str, object]) -> bool:
        """Write one line; False (and `disk_problem` said) when the disk refuses: what is in memory still goes
        out while the process lives. Never raises OSError: acks come on paho's network thread."""
        line = (json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n").encode()
        try:
            view = memoryview(line)
            while view:
                view = view[os.write(self._fd, view):]
            if self._fsync:
                os.fsync(self._fd)
        except OSError as exc:
            self.disk_problem = f"cannot write its buffer (kept in memory only): {exc.strerror or exc}"
            log.debug("MQTT sink: %s: %s", self.path, exc)
            return False
        self.disk_problem = None
        return True

    def _load(self) -> None:
        """What the last run left: read through app.guard.shared's open (a symlink, hard link or FIFO planted
        under the name is refused: PlantedLink, never read or written through), created private (the payloads
        name the parts)."""
        with open_update(self.path, private=True, root=self.path.parent) as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > STATE_FILE_LIMIT:  # a sparse giant planted under the name: refused, naming it
                raise OutputError(f"{self.path}: cannot open the MQTT buffer: "
                                  f"{TooLarge(self.path, size, STATE_FILE_LIMIT)}")
            data = handle.read(STATE_FILE_LIMIT)
        taken: dict[int, Pending] = {}
        dropped: set[int] = set()
        last = 0
        for line in data[: data.rfind(b"\n") + 1].splitlines():  # a torn last line is not a record
            record = _parse(line)
            if record is None:
                continue
            if isinstance(record.get("ack"), int):
                self._done = max(self._done, _int(record, "ack"))
                last = max(last, _int(record, "next", 1) - 1)
            elif isinstance(record.get("drop"), int):
                dropped.add(_int(record, "drop"))
            elif isinstance(record.get("seq"), int) and isinstance(record.get("payload"), dict):
                seq = _int(record, "seq")
                body = json.dumps(record["payload"], ensure_ascii=False, allow_nan=False).encode()
                taken[seq] = Pending(seq, body, str(record.get("station", "")))
                last = max(last, seq)
        self._next = max(last, self._done) + 1
        for seq in sorted(taken):
            if seq > self._done and seq not in dropped:
                self.entries.append(taken[seq])
                self._bytes += len(taken[seq].payload)
        if self.entries:
            log.info("MQTT sink: %d verdicts from the last run still to publish", len(self.entries))

    def _compact_if_large(self, *, at_start: bool = False) -> None:
        try:
            size = os.fstat(self._fd).st_size
        except OSError:
            return
        if size <= (65536 if at_start else 2 * self._max_bytes + 65536):
            return
        try:
            self._rewrite()
        except (OSError, OutputError) as exc:  # the file as it was (appended to) is still whole: compacted later
            log.debug("MQTT sink: its buffer not compacted: %s", exc)

    def _rewrite(self) -> None:
        done = self.entries[0].seq - 1 if self.entries else self._next - 1
        # "next" too: the newest seq may have been dropped, and a seq is never given twice
        lines = [(json.dumps({"ack": done, "next": self._next}) + "\n").encode()]
        lines += [_entry_line(entry) for entry in self.entries]
        # replaces a planted link itself; the temporary and the rename in one pinned folder (root=)
        atomic_write(self.path, b"".join(lines), private=True, durable=True, root=self.path.parent)
        os.close(self._fd)
        self._fd = _open_append(self.path)


def _open_append(path: Path) -> int:
    """A descriptor appending to the buffer, through app.guard.shared (never through a planted link)."""
    with open_append(path, private=True, root=path.parent) as handle:  # the file object closes its own descriptor
        return os.dup(handle.fileno())


def _entry_line(entry: Pending) -> bytes:
    body = json.loads(entry.payload)
    return (json.dumps({"seq": entry.seq, "station": entry.station, "payload": body}, ensure_ascii=False)
            + "\n").encode()


def _int(record: dict[str, object], key: str, default: int = 0) -> int:
    value = record.get(key, default)
    return value if isinstance(value, int) else default


def _parse(line: bytes) -> dict[str, object] | None:
    try:
        record = json.loads(line)
    except ValueError:
        log.warning("MQTT sink: a damaged line in its buffer skipped")
        return None
    return record if isinstance(record, dict) else None
