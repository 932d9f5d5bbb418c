"""The station's overlapped stages (app.runs.station.stages): the next file decoded while one is judged, the folder's
pictures and the journal's line written behind it. Verdicts stay in the frames' order, a frame read ahead when the
station stops is not journaled and the restart judges it, a broken image among good ones is its ERROR line, a
camera's frames are not read ahead (the newest still wins), and a journal that cannot be written ends the station.
And the journal of a watch folder forgets the files no longer in it when the station starts (bounded memory)."""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from waiting import until

from app.inference.decide.verdict import verdict_of
from app.inference.image.pipeline import run_path
from app.inference.model.builder import load_spec
from app.inference.runtime.session import open_session
from app.io.sources import Frame
from app.io.sources.watch import WatchSource
from app.runs.station.journal import JOURNAL_NAME, read_journal
from app.runs.station.run import Station
from app.runs.station.sinks.folder import FolderSink
from app.runs.station.sinks.log import LogSink
from app.runs.station.sinks.options import FolderSinkOptions

REPO = Path(__file__).resolve().parents[3]
SAMPLES = sorted((REPO / "resources" / "samples" / "anomaly").glob("*.png"))
WAIT_S = 90.0  # generous: a loaded 2-core machine; nothing here asserts timing


@pytest.fixture(scope="module")
def model():
    return open_session(load_spec(REPO / "models" / "surface_anomaly.onnx"), "cpu")


@pytest.fixture(scope="module")
def expected(model):
    return {path.name: verdict_of(model.spec, run_path(model, path)).state for path in SAMPLES}


class _Counted:
    """A source that notes each frame it hands out (`taken`), and sets `second` once two were taken."""

    def __init__(self, source) -> None:
        self.source, self.taken, self.second = source, [], threading.Event()

    def __iter__(self) -> Iterator[Frame]:
        for frame in self.source:
            self.taken.append(frame.id)
            if len(self.taken) == 2:
                self.second.set()
            yield frame

    def close(self) -> None:
        self.source.close()

    @property
    def dropped(self) -> int:
        return self.source.dropped

    @property
    def ended(self) -> str | None:
        return self.source.ended

    @property
    def stalled(self) -> bool:
        return self.source.stalled

    @property
    def root(self) -> Path | None:
        return self.source.root


def _folder_of(tmp_path: Path, names: dict[str, Path]) -> Path:
    folder = tmp_path / "in"
    folder.mkdir()
    for name, source in names.items():
        shutil.copyfile(source, folder / name)
    return folder


def _station(model, folder: Path, out: Path, *, counted: list[_Counted] | None = None, **options) -> Station:
    def open_source(done):
        source = WatchSource(folder, settle_s=0.05, exclude=[out], already_done=done)
        if counted is None:
            return source
        counted.append(_Counted(source))
        return counted[-1]

    return Station(name="s", model=model, open_source=open_source, out=out,
                   open_sinks=lambda: [LogSink(out), FolderSink(out, model.spec, FolderSinkOptions(save=("mask",)))],
                   **options)


def _logged(out: Path) -> list[dict]:
    path = out / "verdicts.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _run_until(station: Station, out: Path, count: int) -> None:
    """Run `station` on a thread until `count` verdicts are logged, then stop it."""
    thread = threading.Thread(target=station.run, daemon=True)
    thread.start()
    until(lambda: len(_logged(out)) >= count or not thread.is_alive(), what=f"{count} verdicts logged",
          within_s=WAIT_S)
    station.stop()
    thread.join(WAIT_S)
    assert not thread.is_alive()


@pytest.mark.parametrize("overlap", [True, False])
def test_verdicts_and_journal_keep_the_frames_order(tmp_path, model, expected, overlap):
    names = {f"part_{k:02d}.png": SAMPLES[k % len(SAMPLES)] for k in range(12)}
    folder, out = _folder_of(tmp_path, names), tmp_path / "out"
    _run_until(_station(model, folder, out, overlap=overlap), out, len(names))
    lines = _logged(out)
    assert [line["id"] for line in lines] == sorted(names)  # the source's order (files there at the start: by name)
    assert [line["verdict"] for line in lines] == [expected[names[n].name] for n in sorted(names)]
    assert [entry.id for entry in read_journal(out / JOURNAL_NAME).entries] == sorted(names)
    assert all((out / "results" / f"{name}_mask.png").is_file() for name in names)  # the pictures, each frame's


def test_a_frame_read_ahead_when_stopped_is_not_journaled_and_the_restart_judges_it(tmp_path, model, expected):
    names = {f"part_{k}.png": SAMPLES[k] for k in range(3)}
    folder, out = _folder_of(tmp_path, names), tmp_path / "out"
    counted: list[_Counted] = []
    stopped: list[str] = []

    def stop_after_the_first(verdict, _pictures) -> None:
        if not stopped:
            stopped.append(verdict.frame_id)
            assert counted[0].second.wait(WAIT_S)  # the next file was taken (and decoded) while this one was judged
            station.stop()

    station = _station(model, folder, out, counted=counted, on_verdict=stop_after_the_first)
    stats = station.run()
    assert stopped == ["part_0.png"] and counted[0].taken[:2] == ["part_0.png", "part_1.png"]
    assert stats.frames == 1 and [line["id"] for line in _logged(out)] == ["part_0.png"]
    assert [entry.id for entry in read_journal(out / JOURNAL_NAME).entries] == ["part_0.png"]  # read ahead: not done

    _run_until(_station(model, folder, out), out, 3)
    assert [line["id"] for line in _logged(out)] == ["part_0.png", "part_1.png", "part_2.png"]  # each once
    assert [line["verdict"] for line in _logged(out)][1:] == [expected[SAMPLES[1].name], expected[SAMPLES[2].name]]
    assert sorted(entry.id for entry in read_journal(out / JOURNAL_NAME).entries) == sorted(names)


def test_a_broken_image_among_good_ones_is_its_error_line_in_its_place(tmp_path, model, expected):
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"\x89PNG\r\n\x1a\n" + b"not really a picture" * 10)
    names = {"a.png": SAMPLES[0], "b.png": broken, "c.png": SAMPLES[1], "d.png": broken, "e.png": SAMPLES[2]}
    folder, out = _folder_of(tmp_path, names), tmp_path / "out"
    _run_until(_station(model, folder, out), out, len(names))
    lines = _logged(out)
    assert [line["id"] for line in lines] == sorted(names)
    for line in lines:
        if names[line["id"]] == broken:
            assert line["verdict"] == "ERROR" and line["score"] is None
            assert line["reason"].startswith(f"{line['id']}: ") and str(tmp_path) not in line["reason"]
            assert not (out / "results" / f"{line['id']}_mask.png").exists()
        else:
            assert line["verdict"] == expected[names[line["id"]].name]
    assert len(read_journal(out / JOURNAL_NAME).entries) == len(names)  # an ERROR is done too: not tried again


class _Camera:
    """A camera-like source: pixel frames, as many as asked; counts what it handed out."""

    def __init__(self, count: int) -> None:
        self.count, self.taken, self._closed = count, 0, False
        self.pixels = np.zeros((64, 96, 3), np.uint8)

    def __iter__(self) -> Iterator[Frame]:
        while self.taken < self.count and not self._closed:
            self.taken += 1
            yield Frame(str(self.taken - 1), time.time(), pixels=self.pixels)

    def close(self) -> None:
        self._closed = True

    dropped = 0
    ended = None
    stalled = False
    root = None


def test_a_cameras_frames_are_not_read_ahead(tmp_path, model):
    camera, seen = _Camera(6), []
    station = Station(name="s", model=model, open_source=lambda _done: camera, out=tmp_path / "out",
                      on_verdict=lambda verdict, _pictures: seen.append((verdict.frame_id, camera.taken)))
    stats = station.run()
    assert stats.frames == 6
    # when frame k is judged, the source has handed out k + 1 frames, not more: the next is taken when wanted
    assert seen == [(str(k), k + 1) for k in range(6)]


def test_a_journal_that_cannot_be_written_ends_the_station_with_its_line(tmp_path, model, monkeypatch):
    from app.errors import OutputError
    from app.runs.station.journal import StationJournal

    def refuse(self, frame, status, **_options):
        raise OutputError("station-journal.jsonl: cannot write the station journal (No space left on device)")

    monkeypatch.setattr(StationJournal, "record", refuse)
    folder = _folder_of(tmp_path, {f"part_{k}.png": SAMPLES[k] for k in range(4)})
    station = _station(model, folder, tmp_path / "out")
    with pytest.raises(OutputError, match="No space left on device"):
        station.run()


def test_a_restart_forgets_the_files_gone_from_the_folder_and_skips_the_rest(tmp_path, model):
    names = {f"part_{k}.png": SAMPLES[k] for k in range(4)}
    folder, out = _folder_of(tmp_path, names), tmp_path / "out"
    _run_until(_station(model, folder, out), out, 4)
    (folder / "part_0.png").unlink()  # the line took them away while the station was down
    (folder / "part_2.png").rename(tmp_path / "part_2.png")
    restarted = _station(model, folder, out)
    thread = threading.Thread(target=restarted.run, daemon=True)
    thread.start()
    until(lambda: len(read_journal(out / JOURNAL_NAME).entries) == 2, what="the journal pruned to 2 files",
          within_s=WAIT_S)
    # a last part, moved in (complete at once, its name sorts last): logged after any file judged again
    shutil.copyfile(SAMPLES[0], tmp_path / "last.png")
    (tmp_path / "last.png").rename(folder / "zzzz-last.png")
    until(lambda: "zzzz-last.png" in [line["id"] for line in _logged(out)], what="the last part logged",
          within_s=WAIT_S)
    restarted.stop()
    thread.join(WAIT_S)
    assert [entry.id for entry in read_journal(out / JOURNAL_NAME).entries] == ["part_1.png", "part_3.png",
                                                                               "zzzz-last.png"]
    assert len(_logged(out)) == 5  # nothing judged again
