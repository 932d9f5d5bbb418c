"""The watch-folder source (app.io.sources.watch) on the real file system with the real watchdog observer.

Timing is never asserted (the machine is shared): the latency from a file becoming complete to its frame is
measured and printed (`-s` shows it), exactly-once and completeness are asserted.
"""

from __future__ import annotations

import os
import shutil
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np
import pytest
from waiting import until

from app.io.sources import Frame, NewestWins, SourceError
from app.io.sources.watch import WatchSource

SETTLE_S = 0.5


def png(seed: int, side: int = 160) -> bytes:
    """A real PNG of noise (~75 KB): what a line camera writes."""
    pixels = np.random.default_rng(seed).integers(0, 256, (side, side, 3), dtype=np.uint8)
    ok, encoded = cv2.imencode(".png", pixels)
    assert ok
    return encoded.tobytes()


def write_slowly(path: Path, data: bytes, *, pieces: int = 6, pause_s: float = 0.06) -> float:
    """Open, write `data` in pieces with pauses (shorter than the settle time), close: when it was complete."""
    step = -(-len(data) // pieces)
    with open(path, "wb") as handle:
        for start in range(0, len(data), step):
            handle.write(data[start:start + step])
            handle.flush()
            time.sleep(pause_s)
    return time.time()


def rename_in(staging: Path, dest: Path, data: bytes) -> float:
    """Write `data` whole at `staging`, then rename it to `dest`: when it was complete."""
    staging.write_bytes(data)
    os.rename(staging, dest)
    return time.time()


MARKER = "zzzz-marker.png"  # sorts after every name the tests drop


class Consumer:
    """Iterates a source on its own thread, keeping each frame, when it came and the bytes read at once (the
    marker `quiet` drops is not kept)."""

    def __init__(self, source: WatchSource) -> None:
        self.source = source
        self.got: list[tuple[Frame, float, bytes]] = []
        self.markers = 0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        for frame in self.source:
            assert frame.path is not None
            if frame.id == MARKER:
                self.markers += 1
                continue
            self.got.append((frame, time.time(), frame.path.read_bytes()))

    def ids(self) -> list[str]:
        return [frame.id for frame, _, _ in self.got]

    def wait_for(self, done: Callable[[list[str]], bool], *, within_s: float = 20) -> None:
        """Until `done(ids)`, then `quiet` (anything yielded twice is in by then); then close."""
        until(lambda: done(self.ids()), what="the frames expected", within_s=within_s)
        self.quiet()
        self.stop()

    def quiet(self) -> None:
        """Wait until the source has gone past everything done in the folder so far: a marker written in place
        after it is noted after it, settles no sooner and sorts last, so a file it would yield (again) comes
        before the marker does. Polled, a second marker: the first may share a look at the folder with a change
        made before it. The marker is removed again (a later source on the folder must not find it)."""
        for _ in range(2 if self.source.polling else 1):
            seen = self.markers
            (self.source.root / MARKER).write_bytes(b"marker")
            until(lambda seen=seen: self.markers > seen, what="the marker yielded")
            (self.source.root / MARKER).unlink()

    def stop(self) -> None:
        self.source.close()
        self._thread.join(timeout=5)
        assert not self._thread.is_alive()


def percentiles(values: list[float]) -> str:
    values = sorted(values)
    p95 = values[min(len(values) - 1, round(0.95 * (len(values) - 1)))]
    return f"p50 {statistics.median(values) * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms, max {values[-1] * 1000:.0f} ms"


def drop_files(root: Path, staging: Path, count: int, *, rate: float) -> tuple[dict[str, bytes], dict[str, float],
                                                                                   dict[str, str]]:
    """`count` files at `rate` per second: even ones written slowly in place, odd ones renamed in (from a folder
    outside the watched one, or from a temporary name inside it). (contents, completion times, kinds) by id."""
    contents = {f"part{i:03d}.png": png(i) for i in range(count)}
    completed: dict[str, float] = {}
    kinds: dict[str, str] = {}
    threads = []

    def drop(i: int, name: str) -> None:
        if i % 2 == 0:
            kinds[name], completed[name] = "slow", write_slowly(root / name, contents[name])
        elif i % 4 == 1:
            kinds[name], completed[name] = "outside", rename_in(staging / name, root / name, contents[name])
        else:
            kinds[name], completed[name] = "inside", rename_in(root / f"{name}.part", root / name, contents[name])

    start = time.monotonic()
    for i, name in enumerate(contents):
        time.sleep(max(0.0, start + i / rate - time.monotonic()))
        thread = threading.Thread(target=drop, args=(i, name))
        thread.start()
        threads.append(thread)
    for thread in threads:
        thread.join()
    return contents, completed, kinds


def check_exactly_once_and_whole(consumer: Consumer, contents: dict[str, bytes], root: Path) -> None:
    counts = Counter(consumer.ids())
    assert sorted(counts) == sorted(contents), "every file yielded"
    assert [name for name, n in counts.items() if n > 1] == [], "none yielded twice"
    for frame, _, read in consumer.got:
        assert read == contents[frame.id], f"{frame.id}: read before it was complete"
        info = os.stat(root / frame.id)
        assert (frame.size, frame.mtime_ns) == (info.st_size, info.st_mtime_ns)
        assert frame.path == root / frame.id


def latency_report(consumer: Consumer, completed: dict[str, float], kinds: dict[str, str]) -> dict[str, list[float]]:
    by_kind: dict[str, list[float]] = {"all": []}
    for frame, came, _ in consumer.got:
        latency = came - completed[frame.id]
        by_kind["all"].append(latency)
        by_kind.setdefault(kinds[frame.id], []).append(latency)
    for kind, values in by_kind.items():
        print(f"complete → yielded, {kind} ({len(values)} files): {percentiles(values)}")
    return by_kind


@pytest.mark.parametrize("polling", [False, True], ids=["inotify", "polling"])
def test_files_dropped_at_10_per_s_are_each_yielded_once_and_whole(tmp_path, polling):
    """The issue's done-when: 100 files at 10/s (half written slowly in pieces, half renamed in), each yielded
    exactly once, none half-read. Polling (a network share) is checked with 20 files."""
    root, staging = tmp_path / "line", tmp_path / "staging"
    root.mkdir()
    staging.mkdir()
    consumer = Consumer(WatchSource(root, settle_s=SETTLE_S, polling=polling, poll_s=0.25))
    contents, completed, kinds = drop_files(root, staging, 20 if polling else 100, rate=10)
    consumer.wait_for(lambda ids: set(ids) >= set(contents))
    check_exactly_once_and_whole(consumer, contents, root)
    assert consumer.source.polling == polling
    latency_report(consumer, completed, kinds)


def test_temporary_names_and_other_files_are_ignored_and_a_growing_file_waits(tmp_path):
    root = tmp_path / "line"
    (root / ".staging").mkdir(parents=True)
    dicom = bytes(128) + b"DICM" + bytes(64)
    consumer = Consumer(WatchSource(root, settle_s=SETTLE_S, recursive=True))
    for name in (".hidden.png", "a.png.tmp", "A.PNG.TMP", "a.png.part", "a.png~", "a.png.crdownload",
                 "a.png.partial", ".staging/b.png", "notes.txt", "IM0001", "empty.png", ".IM0003.x1Yz",
                 "~$a.png"):  # ~$: an Office/Windows owner file (it was taken as an image)
        (root / name).write_bytes(b"" if name == "empty.png" else dicom if name == ".IM0003.x1Yz" else b"not DICOM")
    (root / "IM0002").write_bytes(dicom)  # no extension, but DICOM: taken
    (root / "1.2.840.99.5").write_bytes(dicom)  # a UID name: taken as DICOM too
    data = png(7)
    last_write = 0.0
    for start in range(0, len(data), len(data) // 8):  # grows for ~1.6 s, each piece opened and closed again
        with open(root / "grow.png", "ab") as handle:
            handle.write(data[start:start + len(data) // 8])
        last_write = time.time()
        time.sleep(0.2)
    consumer.wait_for(lambda ids: {"grow.png", "IM0002", "1.2.840.99.5"} <= set(ids))
    assert sorted(consumer.ids()) == ["1.2.840.99.5", "IM0002", "grow.png"]
    by_id = {frame.id: (came, read) for frame, came, read in consumer.got}
    assert by_id["grow.png"][1] == data and by_id["grow.png"][0] > last_write
    assert by_id["IM0002"][1] == dicom


def test_files_there_at_the_start_are_taken_by_name_unless_done(tmp_path):
    root = tmp_path / "line"
    (root / "sub").mkdir(parents=True)
    for name in ("img10.png", "img2.png", "img1.png", "scan.nii.gz", "sub/a.png"):
        (root / name).write_bytes(name.encode())
    asked: list[tuple[str, int | None, int | None, int | None, int | None]] = []

    def done(frame: Frame) -> bool:
        asked.append((frame.id, frame.size, frame.mtime_ns, frame.inode, frame.ctime_ns))
        return frame.id == "img2.png"

    flat = Consumer(WatchSource(root, settle_s=0.2, already_done=done))
    flat.wait_for(lambda ids: len(ids) >= 3, within_s=5)
    assert flat.ids() == ["img1.png", "img10.png", "scan.nii.gz"]
    info = os.stat(root / "img2.png")
    assert ("img2.png", info.st_size, info.st_mtime_ns, info.st_ino, info.st_ctime_ns) in asked
    deep = Consumer(WatchSource(root, settle_s=0.2, recursive=True, exclude=[root / "sub"]))
    deep.wait_for(lambda ids: len(ids) >= 4, within_s=5)
    assert deep.ids() == ["img1.png", "img2.png", "img10.png", "scan.nii.gz"]
    (root / "sub" / "b.png").write_bytes(b"later")
    (root / "new").mkdir()
    (root / "new" / "c.png").write_bytes(b"in a new folder")
    recursive = Consumer(WatchSource(root, settle_s=0.2, recursive=True, already_done=done))
    recursive.wait_for(lambda ids: len(ids) >= 6, within_s=5)
    assert recursive.ids() == ["img1.png", "img10.png", "new/c.png", "scan.nii.gz", "sub/a.png", "sub/b.png"]


def test_a_file_replaced_under_its_name_is_new_work_and_a_touch_is_not(tmp_path):
    root = tmp_path / "line"
    root.mkdir()
    consumer = Consumer(WatchSource(root, settle_s=0.3))
    rename_in(tmp_path / "x", root / "part.png", b"first part")
    until(consumer.ids, what="the first frame", within_s=5)
    os.chmod(root / "part.png", 0o600)  # attributes only: not new work
    consumer.quiet()  # were it taken as new work, it would be yielded by now
    write_slowly(root / "part.png", b"second part, longer")  # the same name, a new size and mtime: new work
    consumer.wait_for(lambda ids: len(ids) >= 2, within_s=5)
    assert [read for _, _, read in consumer.got] == [b"first part", b"second part, longer"]
    assert consumer.source.dropped == 0


def test_the_source_ends_when_the_watched_folder_disappears(tmp_path):
    root = tmp_path / "line"
    root.mkdir()
    source = WatchSource(root, settle_s=0.2)
    consumer = Consumer(source)
    (root / "a.png").write_bytes(b"a")
    until(consumer.ids, what="the first frame", within_s=5)
    shutil.rmtree(root)
    consumer._thread.join(timeout=5)
    assert not consumer._thread.is_alive(), "iteration ended by itself"
    assert consumer.ids() == ["a.png"]
    assert source.ended == f"{root}: the watched folder is gone (removed, renamed or unmounted): watching ended"
    source.close()


def test_a_missing_folder_is_one_line(tmp_path):
    with pytest.raises(SourceError) as caught:
        WatchSource(tmp_path / "nowhere")
    assert str(caught.value) == f"{tmp_path / 'nowhere'}: not a folder: there is nothing to watch"


def test_newest_wins_drops_and_counts():
    box = NewestWins()
    for n in range(3):
        box.put(Frame(str(n), float(n), pixels=np.full((2, 2), n, np.uint8)))
    frame = box.take(timeout=0)
    assert frame is not None and frame.id == "2" and box.dropped == 2
    assert box.take(timeout=0.01) is None
    box.close()
    assert box.take() is None
    with pytest.raises(ValueError):
        Frame("x", 0.0)


def test_an_excluded_folder_around_the_watched_one_excludes_nothing_and_the_root_itself_is_refused(tmp_path):
    # `watch m incoming --out .` (the output folder around the watched one) excluded every file: 0 frames, silently;
    # `--out incoming` (the watched folder itself) likewise
    root = tmp_path / "out" / "incoming"
    root.mkdir(parents=True)
    (tmp_path / "out" / "results").mkdir()
    consumer = Consumer(WatchSource(root, settle_s=SETTLE_S, recursive=True, exclude=[tmp_path / "out"]))
    (root / "part.png").write_bytes(png(3))
    consumer.wait_for(lambda ids: "part.png" in ids)
    assert consumer.ids() == ["part.png"]
    with pytest.raises(SourceError) as caught:
        WatchSource(root, exclude=[root])
    assert str(caught.value) == (f"{root}: the watched folder is the output folder: its own pictures would come "
                                 "back as parts; give an output folder outside it (or in a sub-folder of it)")


def test_another_part_renamed_in_with_the_same_size_and_mtime_is_new_work(tmp_path):
    # the identity was (size, mtime_ns): a writer that keeps them (`cp -p`, `rsync -t`) slipped another part in
    # under a judged name, and it was never judged (here: the second frame never came)
    root = tmp_path / "line"
    root.mkdir()
    consumer = Consumer(WatchSource(root, settle_s=0.3))
    first, second = png(1), png(2)
    assert len(first) == len(second)
    rename_in(tmp_path / "a.staged", root / "a.png", first)
    until(consumer.ids, what="the first frame", within_s=5)
    judged = os.stat(root / "a.png")
    (tmp_path / "b.staged").write_bytes(second)
    os.utime(tmp_path / "b.staged", ns=(judged.st_atime_ns, judged.st_mtime_ns))  # as `cp -p` leaves it
    os.rename(tmp_path / "b.staged", root / "a.png")
    assert (os.stat(root / "a.png").st_size, os.stat(root / "a.png").st_mtime_ns) == \
        (judged.st_size, judged.st_mtime_ns)
    consumer.wait_for(lambda ids: len(ids) >= 2, within_s=5)
    assert [read for _, _, read in consumer.got] == [first, second]


def test_a_part_slipped_in_while_no_station_ran_is_judged_at_the_restart(tmp_path):
    # the journal's identity was (size, mtime_ns) too: across a restart the other part was taken as done
    from app.runs.station.journal import StationJournal

    root, out = tmp_path / "line", tmp_path / "out"
    root.mkdir()
    (root / "a.png").write_bytes(png(1))
    with StationJournal(out) as journal:
        consumer = Consumer(WatchSource(root, settle_s=0.2, already_done=journal.has))
        consumer.wait_for(lambda ids: len(ids) >= 1, within_s=5)
        journal.record(consumer.got[0][0], "OK")
    judged = os.stat(root / "a.png")
    (tmp_path / "b.staged").write_bytes(png(2))
    os.utime(tmp_path / "b.staged", ns=(judged.st_atime_ns, judged.st_mtime_ns))
    os.rename(tmp_path / "b.staged", root / "a.png")
    with StationJournal(out) as journal:
        again = Consumer(WatchSource(root, settle_s=0.2, already_done=journal.has))
        again.wait_for(lambda ids: len(ids) >= 1, within_s=5)
    assert [read for _, _, read in again.got] == [png(2)]


def test_a_link_or_a_fifo_in_the_watched_folder_is_never_yielded_and_said_once(tmp_path, caplog):
    # the source stat()ed through links: a link to a file outside the folder was yielded (and judged, copied)
    root, outside = tmp_path / "line", tmp_path / "private"
    (root / "sub").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.png").write_bytes(png(3))
    (root / "evil.png").symlink_to(outside / "secret.png")
    (root / "inner.png").symlink_to(root / "sub")  # a link to a folder inside: neither a file nor walked
    (root / "linked").symlink_to(outside, target_is_directory=True)
    os.mkfifo(root / "pipe.png")
    consumer = Consumer(WatchSource(root, settle_s=0.2, recursive=True))
    rename_in(tmp_path / "good.staged", root / "good.png", png(4))
    (root / "sub" / "deep.png").write_bytes(png(5))
    consumer.wait_for(lambda ids: len(ids) >= 2, within_s=5)
    assert sorted(consumer.ids()) == ["good.png", "sub/deep.png"]
    said = sorted(r.getMessage() for r in caplog.records if "is not judged" in r.getMessage())
    assert said == ["watch folder: evil.png is not judged (not a regular file: a symbolic link)",
                    "watch folder: pipe.png is not judged (not a regular file: a named pipe (FIFO))"]
