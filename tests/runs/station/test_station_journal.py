"""The station journal (app.runs.station.journal): each file processed exactly once, across a kill -9 too."""

from __future__ import annotations

import gc
import hashlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import tracemalloc
from collections import Counter
from pathlib import Path

import pytest
from waiting import until

from app.errors import OutputError
from app.io.sources import Frame
from app.runs.station.journal import JOURNAL_NAME, StationJournal, read_journal

REPO = Path(__file__).resolve().parents[3]


def file_frame(file_id: str, size: int = 10, mtime_ns: int = 1_000) -> Frame:
    return Frame(file_id, 0.0, path=Path(file_id), size=size, mtime_ns=mtime_ns)


def test_a_record_survives_reopening_and_a_replaced_file_is_new_work(tmp_path):
    with StationJournal(tmp_path) as journal:
        entry = journal.record(file_frame("a/part1.png"), "OK", at=123.5)
        journal.record(file_frame("part2.png", size=20), "NG")
    assert entry.status == "OK" and entry.time == 123.5
    journal = StationJournal(tmp_path)
    assert journal.done("a/part1.png", 10, 1_000) and journal.done("part2.png", 20, 1_000)
    assert not journal.done("part2.png", 21, 1_000), "same name, another size: new work"
    assert not journal.done("part2.png", 20, 1_001), "same name, another mtime: new work"
    assert not journal.done("part3.png", 10, 1_000)
    journal.record(file_frame("part2.png", size=21), "REVIEW")  # the replacement, processed: the latest counts
    assert journal.done("part2.png", 21, 1_000) and not journal.done("part2.png", 20, 1_000)
    assert len(journal) == 2 and journal.lines == 3
    journal.close()
    lines = (tmp_path / JOURNAL_NAME).read_text().splitlines()
    assert json.loads(lines[0]) == {"id": "a/part1.png", "size": 10, "mtime_ns": 1_000, "status": "OK",
                                    "time": 123.5}


def test_a_torn_last_line_is_no_record_and_is_cut_off(tmp_path):
    with StationJournal(tmp_path) as journal:
        for n in range(3):
            journal.record(file_frame(f"p{n}.png"), "OK")
    path = tmp_path / JOURNAL_NAME
    whole = path.read_bytes()
    with open(path, "ab") as handle:  # what a kill -9 in the middle of a write leaves
        handle.write(b'{"id":"p3.png","size":10,"mti')
    assert read_journal(path).torn
    journal = StationJournal(tmp_path)
    assert journal.torn and not journal.done("p3.png", 10, 1_000) and len(journal) == 3
    assert path.read_bytes() == whole, "the torn tail is cut before anything is appended"
    journal.record(file_frame("p3.png"), "OK")
    journal.close()
    found = read_journal(path)
    assert [e.id for e in found.entries] == ["p0.png", "p1.png", "p2.png", "p3.png"]
    assert not found.torn and found.damaged == 0


def test_a_damaged_line_is_skipped_and_counted(tmp_path):
    path = tmp_path / JOURNAL_NAME
    good = '{"id":"a.png","size":1,"mtime_ns":2,"status":"OK","time":3}\n'
    path.write_text(good + "garbage\n" + '{"id":5,"size":1,"mtime_ns":2,"status":"OK","time":3}\n' + good)
    journal = StationJournal(tmp_path)
    assert journal.damaged == 2 and len(journal) == 1 and journal.done("a.png", 1, 2)
    journal.close()


def test_names_that_are_no_utf8_or_hold_a_newline_round_trip(tmp_path):
    odd = [os.fsdecode(b"caf\xe9.png"), "two\nlines.png", "tab\there.png"]
    with StationJournal(tmp_path) as journal:
        for name in odd:
            journal.record(file_frame(name), "OK")
    assert (tmp_path / JOURNAL_NAME).read_text().count("\n") == 3
    journal = StationJournal(tmp_path)
    assert all(journal.done(name, 10, 1_000) for name in odd)
    journal.close()


def test_compaction_keeps_every_answer_and_bounds_the_file(tmp_path):
    journal = StationJournal(tmp_path, max_entries=10, keep=lambda file_id: file_id != "gone.png")
    for size in range(1, 8):  # 7 versions of each of 4 names: 28 records
        for name in ("a.png", "b.png", "c.png", "gone.png"):
            journal.record(file_frame(name, size=size), "OK")
    assert journal.lines <= 10
    for name in ("a.png", "b.png", "c.png"):
        assert journal.done(name, 7, 1_000) and not journal.done(name, 6, 1_000)
    journal.close()
    found = read_journal(tmp_path / JOURNAL_NAME)
    assert len(found.entries) <= 10 and not found.torn and found.damaged == 0
    reopened = StationJournal(tmp_path, max_entries=10)
    for name in ("a.png", "b.png", "c.png"):
        assert reopened.done(name, 7, 1_000)
    assert list(tmp_path.iterdir()) == [tmp_path / JOURNAL_NAME], "no temporary left"
    reopened.close()


def test_compaction_with_more_live_files_than_the_bound_keeps_them_all(tmp_path):
    journal = StationJournal(tmp_path, max_entries=5)
    for n in range(40):
        journal.record(file_frame(f"p{n}.png"), "OK")
    assert all(journal.done(f"p{n}.png", 10, 1_000) for n in range(40))
    assert journal.lines <= 2 * 40
    journal.close()


def test_an_id_costs_a_hash_in_memory_not_its_record(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "fsync", lambda fd: None)  # 20,000 fsyncs measure the disk, not the journal's memory
    journal = StationJournal(tmp_path, max_entries=50_000)
    gc.collect()
    tracemalloc.start()
    try:
        for n in range(20_000):  # one Path for all: pathlib interns each new path's parts
            journal.record(Frame(f"line3/part_{n:06d}.png", 0.0, path=tmp_path, size=2_000_000 + n,
                                 mtime_ns=1_733_000_000 * 10**9 + n), "OK")
        gc.collect()
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert len(journal) == 20_000 and journal.done("line3/part_019999.png", 2_019_999, 1_733_000_000 * 10**9 + 19_999)
    assert held / 20_000 < 160, f"{held / 20_000:.0f} bytes an id (the record itself was ≈ 300 B traced, 0.5 kB RSS)"
    journal.close()


def test_prune_forgets_gone_files_and_compaction_keeps_memory_bounded(tmp_path):
    present: set[str] = set()
    journal = StationJournal(tmp_path, max_entries=500)
    journal.prune(lambda file_id: file_id in present)
    for n in range(5_000):  # the line keeps the last 100 parts in the folder, deleting older ones
        name = f"part_{n:05d}.png"
        present.add(name)
        present.discard(f"part_{n - 100:05d}.png")
        journal.record(file_frame(name), "OK")
        assert len(journal) <= 500 + 1 and journal.lines <= 500 + 1
    assert all(journal.done(name, 10, 1_000) for name in present)  # the files still there: done
    journal.close()
    reopened = StationJournal(tmp_path, max_entries=500)
    assert all(reopened.done(name, 10, 1_000) for name in present)
    present -= {f"part_{n:05d}.png" for n in range(4_900, 4_950)}  # 50 more deleted while no station ran
    before = len(reopened)
    assert reopened.prune(lambda file_id: file_id in present) == before - 50
    assert len(reopened) == len(present) == 50 and reopened.lines == 50
    assert all(reopened.done(name, 10, 1_000) for name in present)
    assert {e.id for e in read_journal(tmp_path / JOURNAL_NAME).entries} == present
    reopened.close()


def test_bad_records_and_a_fifo_under_its_name_are_refused(tmp_path):
    with StationJournal(tmp_path) as journal:
        with pytest.raises(ValueError, match="one non-empty line"):
            journal.record(file_frame("a.png"), "OK\nNG")
        with pytest.raises(ValueError, match="not camera frames"):
            journal.record(Frame("7", 0.0, pixels=b"x"), "OK")  # type: ignore[arg-type]
    fifo_dir = tmp_path / "fifo"
    fifo_dir.mkdir()
    os.mkfifo(fifo_dir / JOURNAL_NAME)
    with pytest.raises(OutputError) as caught:
        StationJournal(fifo_dir)
    assert str(caught.value).startswith(f"{fifo_dir / JOURNAL_NAME}: cannot open the station journal (")


# --- exactly once across kill -9: a station process (the real source and journal) killed mid-run, restarted ---

WORKER = """
import hashlib, sys, time
from pathlib import Path
from app.io.sources.watch import WatchSource
from app.runs.station.journal import StationJournal
journal = StationJournal(Path(sys.argv[2]))
hold = int(sys.argv[3])  # the frame after which it stops, in the middle of its work, until it is killed
with WatchSource(Path(sys.argv[1]), settle_s=0.3, already_done=journal.has) as source:
    print("ready", flush=True)
    for n, frame in enumerate(source, 1):
        print("yield", frame.id, hashlib.sha256(frame.path.read_bytes()).hexdigest(), flush=True)
        time.sleep(0.02 if n != hold else 3600)  # the model and the sinks
        journal.record(frame, "OK")
"""


class Station:
    """The worker in a subprocess; its stdout lines in a queue."""

    def __init__(self, root: Path, out: Path, *, hold: int = 0) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", WORKER, str(root), str(out), str(hold)], cwd=REPO,
                                        stdout=subprocess.PIPE, text=True)
        self.lines: queue.Queue[str] = queue.Queue()
        self.yields: list[tuple[str, str]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        assert self.lines.get(timeout=30) == "ready"

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))

    def collect(self) -> list[tuple[str, str]]:
        while True:
            try:
                line = self.lines.get_nowait()
            except queue.Empty:
                return self.yields
            _, file_id, digest = line.split(" ")
            self.yields.append((file_id, digest))

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)
        self._reader.join(timeout=10)  # it has read to the end of the dead process's output
        assert not self._reader.is_alive()
        self.collect()


LAST = "zzzz-last.png"  # sorts after every part's name


def _journaled(out: Path) -> set[str]:
    return {entry.id for entry in read_journal(out / JOURNAL_NAME).entries}


def test_kill_9_mid_run_then_restart_processes_each_file_exactly_once(tmp_path):
    root, staging, out = tmp_path / "line", tmp_path / "staging", tmp_path / "out"
    for folder in (root, staging, out):
        folder.mkdir()
    contents = {f"part{i:02d}.png": hashlib.sha256(str(i).encode()).digest() * (500 + 37 * i) for i in range(40)}
    names = list(contents)

    def produce(first: int, last: int) -> None:  # 20 files/s: even ones written in pieces, odd ones renamed in
        for i in range(first, last):
            name, data = names[i], contents[names[i]]
            if i % 2:
                (staging / name).write_bytes(data)
                os.rename(staging / name, root / name)
            else:
                with open(root / name, "wb") as handle:
                    for start in range(0, len(data), len(data) // 4):
                        handle.write(data[start:start + len(data) // 4])
                        handle.flush()
                        time.sleep(0.01)
            time.sleep(0.05)

    first = Station(root, out, hold=8)  # killed while the 8th file is in work
    producer = threading.Thread(target=produce, args=(0, 20))
    producer.start()
    until(lambda: len(first.collect()) >= 8, what="8 files yielded", within_s=20, every_s=0.01)
    first.kill()
    producer.join()
    committed_first = {entry.id for entry in read_journal(out / JOURNAL_NAME).entries}
    assert len(first.yields) == 8 and len(committed_first) == 7
    produce(20, 30)  # while the station is down

    second = Station(root, out)
    produce(30, 40)  # after the restart
    until(lambda: _journaled(out) >= set(contents), what="every file journaled", within_s=30)
    # a last part written in place: its events come after every other file's, it settles no sooner and sorts last,
    # so a file to be processed twice is yielded (and journaled) before it
    contents[LAST] = b"the last part"
    (root / LAST).write_bytes(contents[LAST])
    until(lambda: LAST in _journaled(out), what=f"{LAST} journaled", within_s=30)
    second.kill()

    found = read_journal(out / JOURNAL_NAME)
    counts = Counter(entry.id for entry in found.entries)
    assert sorted(counts) == sorted(contents), "none lost"
    assert [name for name, n in counts.items() if n > 1] == [], "none recorded twice"
    second_ids = {file_id for file_id, _ in second.yields}
    assert second_ids & committed_first == set(), "nothing committed before the kill is processed again"
    interrupted = {file_id for file_id, _ in first.yields} - committed_first
    assert interrupted and interrupted <= second_ids, "a file killed while in work is processed again"
    for file_id, digest in first.yields + second.yields:
        assert digest == hashlib.sha256(contents[file_id]).hexdigest(), f"{file_id}: half-read"
    print(f"first run: {len(first.yields)} yielded, {len(committed_first)} committed before kill -9; "
          f"second run: {len(second.yields)} yielded")
