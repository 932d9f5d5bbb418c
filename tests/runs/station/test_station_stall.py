"""A stalled source (app.runs.station.run, app.runs.station.stats): the stalls counted with the longest, the sinks that
carry the alarm (StallSink) told as it starts and ends, not stalled at the start, stalled when a camera's own stall
ended the source; the progress callback redrawn while no frame comes."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from waiting import until

from app.inference.runtime.session import open_session
from app.io.sources import Frame
from app.runs.station.file import parse_station
from app.runs.station.run import Station
from app.runs.station.setup import station_spec
from app.runs.station.sinks import StallAlarm, StallSink, StationVerdict
from app.runs.station.stats import Meter, StationStats

REPO = Path(__file__).resolve().parents[3]
WAIT_S = 90.0  # generous: a loaded 2-core machine; no timing is asserted


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    folder = tmp_path_factory.mktemp("spec")
    station = parse_station({"name": "line-3", "model": str(REPO / "models" / "surface_anomaly.onnx"),
                             "device": "cpu", "source": {"camera": 0}, "out": "out"}, path=None, base=folder)
    return open_session(station_spec(station), "cpu")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _verdict(n: int) -> StationVerdict:
    return StationVerdict(station="s", frame_id=str(n), time=0.0, verdict="OK", score=None, reason="",
                          latency_ms=1.0)


def test_the_meter_counts_each_stall_and_the_longest_the_one_going_on_included():
    clock = Clock()
    meter = Meter(stall_after_s=30, clock=clock)
    clock.now += 10
    meter.add(_verdict(1))  # 10 s: no stall
    clock.now += 42
    stats = meter.snapshot(dropped=0, sink_problems=())
    assert (stats.stalled, stats.stalls, stats.longest_stall_s, stats.since_frame_s) == (True, 1, 42, 42)
    meter.add(_verdict(2))  # the 42 s stall ended
    clock.now += 31
    meter.add(_verdict(3))  # another, 31 s
    clock.now += 5
    stats = meter.snapshot(dropped=0, sink_problems=())
    assert (stats.stalled, stats.stalls, stats.longest_stall_s, stats.last_stall_s) == (False, 2, 42, 31)
    assert stats.summary().endswith("; 0 dropped; 2 stalls, longest 42 s")
    clock.now += 50  # stalled at the stop: counted, the longest now
    meter.end()
    clock.now += 1000  # the clock stops at the end
    stats = meter.snapshot(dropped=0, sink_problems=(), ended="stopped")
    assert (stats.stalled, stats.stalls, stats.longest_stall_s, stats.since_frame_s) == (False, 3, 55, 55)


def test_without_a_stall_the_summary_is_as_before_and_a_source_that_ended_stalled_is_one():
    clock = Clock()
    meter = Meter(clock=clock)  # no stall_after_s: a camera's own limit
    meter.add(_verdict(1))
    clock.now += 6
    assert meter.snapshot(dropped=0, sink_problems=()).summary().endswith("; 0 dropped")
    meter.end(stalled=True)
    stats = meter.snapshot(dropped=0, sink_problems=(), ended="camera 0: no frame for 5 s: the camera stalled")
    assert (stats.stalls, stats.longest_stall_s) == (1, 6)
    assert stats.summary().endswith("; 0 dropped; 1 stall, longest 6 s")


class Camera:
    """A live source whose frames a test puts in; `stall()` ends it as a camera's own stall limit does."""

    def __init__(self) -> None:
        self.frames: queue.Queue[Frame | None] = queue.Queue()
        self.ended: str | None = None
        self.stalled = False
        self.dropped = 0
        self.root: Path | None = None  # frames are pixels, not files
        self._count = 0

    def put(self) -> None:
        self._count += 1
        pixels = np.full((64, 64, 3), 128, dtype=np.uint8)
        self.frames.put(Frame(id=str(self._count), timestamp=time.time(), pixels=pixels))

    def stall(self) -> None:
        self.stalled, self.ended = True, "camera 0: no frame for 5 s: the camera stalled"
        self.frames.put(None)

    def __iter__(self) -> Iterator[Frame]:
        while (frame := self.frames.get()) is not None:
            yield frame

    def close(self) -> None:
        self.frames.put(None)


class Listener:
    """A sink that records the verdicts and the stall alarms it hears."""

    name = "listener"
    problem = None

    def __init__(self) -> None:
        self.verdicts: list[StationVerdict] = []
        self.alarms: list[StallAlarm] = []

    def publish(self, verdict: StationVerdict) -> bool:
        self.verdicts.append(verdict)
        return True

    def stall(self, alarm: StallAlarm) -> None:
        self.alarms.append(alarm)

    def close(self) -> None:
        pass


def _started(model, tmp_path: Path, camera: Camera, listener: Listener, *, stall_after_s: float | None,
             progress=None) -> tuple[Station, threading.Thread, list[StationStats]]:
    station = Station(name="line-3", model=model, open_source=lambda _done: camera, out=tmp_path / "out",
                      sinks=[listener], stall_after_s=stall_after_s, progress=progress)
    (tmp_path / "out").mkdir()
    result: list[StationStats] = []
    thread = threading.Thread(target=lambda: result.append(station.run()), daemon=True)
    thread.start()
    return station, thread, result


def test_the_sinks_hear_the_stall_as_it_starts_and_as_frames_come_again(model, tmp_path):
    assert isinstance(Listener(), StallSink)
    camera, listener, shown = Camera(), Listener(), []
    station, thread, result = _started(model, tmp_path, camera, listener, stall_after_s=0.3, progress=shown.append)
    until(lambda: [a.stalled for a in listener.alarms] == [False, True], what="not stalled at the start, then stalled",
          within_s=WAIT_S)
    # while no frame comes, the numbers still reach `progress` (the CLI's live line), stalled
    until(lambda: any(stats.stalled for stats in shown), what="a stalled progress", within_s=WAIT_S)
    camera.put()
    until(lambda: len(listener.verdicts) == 1 and [a.stalled for a in listener.alarms][:3] == [False, True, False],
          what="cleared by the frame", within_s=WAIT_S)
    until(lambda: [a.stalled for a in listener.alarms] == [False, True, False, True], what="stalled again",
          within_s=WAIT_S)
    station.stop()
    thread.join(WAIT_S)
    assert not thread.is_alive()
    alarm = listener.alarms[1]
    assert (alarm.station, alarm.limit_s) == ("line-3", 0.3) and alarm.since < alarm.time
    assert [a.stalled for a in listener.alarms] == [False, True, False, True]  # a stop leaves the alarm as it was
    assert (result[0].stalls, result[0].frames) == (2, 1)


def test_a_camera_that_ends_stalled_raises_the_alarm_as_the_station_ends(model, tmp_path):
    camera, listener = Camera(), Listener()
    _, thread, result = _started(model, tmp_path, camera, listener, stall_after_s=None)
    until(lambda: listener.alarms, what="the alarm's first state", within_s=WAIT_S)
    camera.put()
    until(lambda: listener.verdicts, what="a verdict", within_s=WAIT_S)
    camera.stall()
    thread.join(WAIT_S)
    assert not thread.is_alive()
    assert [a.stalled for a in listener.alarms] == [False, True]
    assert listener.alarms[-1].limit_s is None  # the camera's own limit, not the station's
    assert result[0].stalls == 1 and "stalled" in (result[0].ended or "")
