"""The viewer's Station view (issue 29): a real station from a station file on the bundled anomaly model with a
REVIEW band over a watch folder: the banner follows each verdict in its colour, the counts, the NG/REVIEW strip and
a click that opens the frame in the viewer, the alarms of a stalled source and of a failing sink, a bad station file
and a refused model in one line, Stop and a window closed while the station runs ending its thread cleanly. No
timing is asserted; the waits are generous (a loaded 2-core machine)."""

from __future__ import annotations

import shutil
import socket
import threading
from pathlib import Path

import numpy as np
import pytest
import yaml
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox

from app.inference.decide.verdict import verdict_of
from app.inference.image.pipeline import run_path
from app.inference.runtime.session import open_session
from app.runs.outputs.lock import LOCK_NAME
from app.runs.station.file import parse_station
from app.runs.station.setup import station_spec
from app.runs.station.sinks import StationVerdict
from app.runs.station.sinks.folder import Pictures
from app.ui import actions
from app.ui.widgets.station_view import BANNER_COLORS
from app.ui.workers.station_painter import Painter

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "resources" / "samples" / "anomaly"
MODEL = REPO / "models" / "surface_anomaly.onnx"
BAND = {"fail_if": [{"score_above": 0.88}], "review_if": [{"score_above": 0.56}]}
WAIT_MS = 120_000  # generous: a loaded 2-core machine; never a timing assertion


def _station_file(tmp_path: Path, name: str = "STATION.yaml", **values) -> Path:
    (tmp_path / "in").mkdir(exist_ok=True)
    station = {"name": "line-3", "model": str(MODEL), "device": "cpu", "verdict": BAND,
               "source": {"watch": "in", "settle_s": 0.2}, "out": "out", "sinks": {"log": {}, "folder": {}}}
    station.update(values)
    path = tmp_path / name
    path.write_text(yaml.safe_dump(station), encoding="utf-8")
    return path


def _drop(folder: Path, source: Path) -> None:
    """Written beside, then renamed in (complete at once)."""
    partial = folder / f".{source.name}.part"
    shutil.copyfile(source, partial)
    partial.rename(folder / source.name)


@pytest.fixture(scope="module")
def expected(tmp_path_factory):
    """Each sample's verdict, judged directly by the pipeline under the same band."""
    folder = tmp_path_factory.mktemp("spec")
    (folder / "in").mkdir()
    station = parse_station({"model": str(MODEL), "verdict": BAND, "source": {"watch": "in"}, "out": "out"},
                            path=None, base=folder)
    model = open_session(station_spec(station), "cpu")
    found = {path.name: verdict_of(model.spec, run_path(model, path)).state for path in sorted(SAMPLES.glob("*.png"))}
    assert set(found.values()) == {"OK", "REVIEW", "NG"}  # the band splits the samples three ways
    return found


def _started(qtbot, window, path: Path):
    controller = actions.station_controller(window)
    with qtbot.waitSignal(controller.opened, timeout=WAIT_MS):
        assert controller.start(path)
    assert controller.station_thread is not window.worker_thread  # its own thread, not the inference worker's
    return controller


def test_the_banner_counts_and_strip_follow_each_verdict_and_a_thumbnail_opens_in_the_viewer(
        qtbot, make_main_window, tmp_path, expected):
    window = make_main_window()
    path = _station_file(tmp_path)
    controller = _started(qtbot, window, path)
    view = controller.view
    assert controller.showing_station
    assert view.device.text().startswith("Model runs on CPU")  # where it really runs, never a preferred device

    for name, state in sorted(expected.items()):
        _drop(tmp_path / "in", SAMPLES / name)
        qtbot.waitUntil(lambda n=name: view.frame.text().startswith(n), timeout=WAIT_MS)
        assert view.banner.text() == state
        assert f"background: {BANNER_COLORS[state].name()}" in view.banner.styleSheet()
        assert view.reason.text() == ("passed" if state == "OK" else view.reason.text())
        assert view.picture.image() is not None and not view.picture.image().isNull()

    counts = {state: sum(s == state for s in expected.values()) for state in ("OK", "REVIEW", "NG")}
    qtbot.waitUntil(lambda: all(view.counts[s].text() == str(n) for s, n in counts.items()), timeout=WAIT_MS)
    assert view.counts["ERROR"].text() == "0"
    judged = [name for name, state in sorted(expected.items()) if state in ("NG", "REVIEW")]
    qtbot.waitUntil(lambda: view.strip.count() == len(judged), timeout=WAIT_MS)
    texts = [view.strip.item(row).text() for row in range(view.strip.count())]
    assert texts == [f"{expected[name]}  {name}" for name in reversed(judged)]  # newest first

    ng = next(row for row, text in enumerate(texts) if text.startswith("NG"))
    ng_name = texts[ng].split()[-1]
    item = view.strip.item(ng)
    view.strip.scrollToItem(item)
    qtbot.mouseClick(view.strip.viewport(), Qt.MouseButton.LeftButton,
                     pos=view.strip.visualItemRect(item).center())
    copy = tmp_path / "out" / "ng" / ng_name
    assert window.files.current_path() == str(copy)  # the output folder's copy, shown in the viewer
    assert sorted(window.files.paths()) == sorted(str(p) for p in view.strip.paths())
    assert not controller.showing_station
    with qtbot.waitSignal(window.overlay_shown, timeout=WAIT_MS):
        pass  # the viewer runs the station's model on it, with every tool of the viewer
    assert window.model_path == MODEL

    (tmp_path / "in" / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n not a picture")  # not judged: ERROR
    qtbot.waitUntil(lambda: view.frame.text().startswith("broken.png"), timeout=WAIT_MS)
    assert view.banner.text() == "ERROR"
    assert f"background: {BANNER_COLORS['ERROR'].name()}" in view.banner.styleSheet()
    assert view.reason.text().startswith("broken.png")
    assert "no picture" in view.picture.text() and view.picture.image() is None  # never the last part's picture

    with qtbot.waitSignal(controller.ended, timeout=WAIT_MS) as ended:
        controller.stop()
    assert ended.args[0].problem is None and ended.args[0].stats.ended == "stopped"
    assert controller.station_thread is None and not controller.running
    assert view.ended.text().startswith("Station stopped — 9 frames: ")
    assert actions._recent_stations(window).items()[0] == str(path)  # Station ▸ Recent stations
    assert not (tmp_path / "out" / LOCK_NAME).exists()  # the station let go of its output folder
    assert not [t for t in threading.enumerate() if t.name == "station-painter"]


def test_a_stalled_source_shows_the_alarm_and_closing_the_window_ends_the_station(qtbot, make_main_window, tmp_path):
    window = make_main_window()
    controller = _started(qtbot, window, _station_file(tmp_path, stall_after_s=0.5))
    view = controller.view
    qtbot.waitUntil(lambda: view.alarm.isVisible(), timeout=WAIT_MS)
    assert view.alarm.text().startswith("⚠ ALARM — SOURCE STALLED: no frame for ")
    assert view.alarm.text().endswith("(limit 0.5 s)")
    assert view.numbers.text().startswith("no frame yet")  # none came: no rate is passed off as the rate now
    thread = controller.station_thread
    window.close()  # while the station runs: its thread is joined, its output folder let go
    assert controller.station_thread is None and not thread.isRunning()
    assert not (tmp_path / "out" / LOCK_NAME).exists()


def test_a_failing_sink_shows_the_alarm(qtbot, make_main_window, tmp_path):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    window = make_main_window()
    path = _station_file(tmp_path, sinks={"log": {}, "mqtt": {"url": f"mqtt://127.0.0.1:{port}"}})
    controller = _started(qtbot, window, path)
    _drop(tmp_path / "in", SAMPLES / "anomaly_clean_01_metal.png")
    view = controller.view
    qtbot.waitUntil(lambda: "SINK FAILING" in view.alarm.text(), timeout=WAIT_MS)
    assert f"⚠ ALARM — SINK FAILING: mqtt: cannot connect to 127.0.0.1:{port}" in view.alarm.text()
    assert view.alarm.isVisible()


def test_a_bad_station_file_is_one_line_and_nothing_starts(qtbot, make_main_window, tmp_path):
    window = make_main_window()
    path = _station_file(tmp_path, stall_after_s="soon")
    controller = actions.station_controller(window)
    assert not controller.start(path)
    line = f"{path}: 'stall_after_s' must be a number > 0, got 'soon'"
    assert window.status.currentMessage() == line
    boxes = [box for box in window.findChildren(QMessageBox) if box.isVisible()]
    assert [box.text() for box in boxes] == [line]
    assert not controller.running


def test_a_model_without_a_verdict_is_refused_in_one_line(qtbot, make_main_window, tmp_path):
    window = make_main_window()
    shutil.copy(REPO / "models" / "nuclei.onnx", tmp_path / "nuclei.onnx")
    shutil.copy(REPO / "models" / "nuclei.yaml", tmp_path / "nuclei.yaml")
    path = _station_file(tmp_path, model="nuclei.onnx", verdict=None)
    controller = actions.station_controller(window)
    with qtbot.waitSignal(controller.ended, timeout=WAIT_MS) as ended:
        assert controller.start(path)
    line = ("Station could not start: nuclei.onnx has no verdict section: a station needs one to say OK / REVIEW / "
            "NG (verdict: fail_if …, or seglens-cli calibrate --write)")
    assert ended.args[0].stats is None
    assert window.status.currentMessage() == line
    assert controller.view.ended.text() == line
    assert [box.text() for box in window.findChildren(QMessageBox) if box.isVisible()] == [line]
    assert not controller.running


def test_the_painter_draws_the_newest_frame_and_keeps_a_bounded_strip():
    """Frames come faster than it draws: an older undrawn one is replaced (the last is always drawn), and no
    picture carries more thumbnails than the strip keeps."""
    pictures: list = []
    painter = Painter(classes=(), emit=pictures.append, copy_of=lambda verdict, picture: None, keep=4)
    pixels = np.full((90, 160, 3), 128, np.uint8)
    for index in range(200):
        verdict = StationVerdict("s", f"f{index}", 0.0, "NG", 0.9, "score 0.9 > 0.88", 1.0)
        painter.put(verdict, Pictures(None, pixels, None))
    painter.close()
    assert pictures[-1].verdict.frame_id == "f199"
    assert len(pictures) < 200
    assert all(len(picture.thumbs) <= 4 for picture in pictures)
    assert pictures[-1].image.shape == (90, 160, 3)


def test_a_video_that_ends_says_so_and_its_frames_open_from_the_copies_the_folder_sink_wrote(
        qtbot, make_main_window, tmp_path, expected):
    """A camera's or a video's frame has no file: the strip opens the PNG the folder sink wrote of it."""
    import cv2

    ng = next(name for name, state in sorted(expected.items()) if state == "NG")
    ok = next(name for name, state in sorted(expected.items()) if state == "OK")
    order = [ng, ok, ng, ok]
    video = tmp_path / "line.avi"
    first = cv2.imread(str(SAMPLES / ng))
    writer = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"FFV1"), 10, first.shape[1::-1])
    for name in order:
        writer.write(cv2.imread(str(SAMPLES / name)))
    writer.release()
    window = make_main_window()
    controller = actions.station_controller(window)
    path = _station_file(tmp_path, source={"video": "line.avi", "realtime": False})
    with qtbot.waitSignal(controller.ended, timeout=WAIT_MS) as ended:
        assert controller.start(path)
    stats = ended.args[0].stats
    assert ended.args[0].problem is None and stats.counts["NG"] == 2 and stats.counts["OK"] == 2
    view = controller.view
    assert view.ended.text().startswith(f"Station ended by itself: {video}: end of the video (4 frames) — 4 frames: ")
    assert view.ended.isVisible() and not view.stop_button.isEnabled()
    qtbot.waitUntil(lambda: view.strip.count() == 2, timeout=WAIT_MS)
    copies = view.strip.paths()
    assert [p.parent for p in copies] == [tmp_path / "out" / "ng"] * 2 and all(p.suffix == ".png" for p in copies)
    controller.open_frame(copies[1])
    assert window.files.current_path() == str(copies[1])
    decoded = cv2.imread(str(copies[1]))
    assert decoded.shape == first.shape


def test_the_device_line_says_where_the_model_runs_and_why_not_on_the_gpu_asked_for():
    from app.inference.model.session import SessionInfo
    from app.ui.state.station_messages import device_words

    cpu = "CPUExecutionProvider"
    assert device_words(SessionInfo("cpu", cpu, (cpu,))) == ("CPU", "")
    fell = SessionInfo("cuda", cpu, (cpu,), fallback_reason="libcudnn.so.9 not found", gpu_present=True)
    assert device_words(fell) == ("CPU", "cuda was asked for: libcudnn.so.9 not found")
    absent = SessionInfo("auto", cpu, (cpu,), fallback_reason="no NVIDIA GPU", gpu_present=False)
    assert device_words(absent) == ("CPU (no NVIDIA GPU)", "")


def test_an_output_folder_another_station_holds_and_a_second_start_are_one_line_each(
        qtbot, make_main_window, tmp_path):
    from app.runs.outputs.lock import OutputLock

    window = make_main_window()
    controller = actions.station_controller(window)
    with OutputLock(tmp_path / "out"), qtbot.waitSignal(controller.ended, timeout=WAIT_MS) as ended:
        assert controller.start(_station_file(tmp_path))  # its session opens, then the folder's lock refuses it
    problem = ended.args[0].problem
    assert problem.startswith("failed: ") and str(tmp_path / "out") in problem
    assert window.status.currentMessage() == f"Station {problem}" == controller.view.ended.text()
    assert not controller.running

    running = _started(qtbot, window, _station_file(tmp_path, "OTHER.yaml", out="out2"))
    assert not running.start(_station_file(tmp_path))  # one station at a time in a window
    assert window.status.currentMessage() == "A station is running: stop it first (Station ▸ Stop station)"
    assert running.running


def test_a_frame_without_a_kept_file_or_with_its_copy_gone_is_a_line_not_an_error(qtbot, make_main_window,
                                                                                  tmp_path):
    window = make_main_window()
    controller = actions.station_controller(window)
    controller.open_frame(None)
    assert window.status.currentMessage().startswith("No file was kept for that frame: add `folder: {}`")
    controller.open_frame(tmp_path / "out" / "ng" / "gone.png")
    assert window.status.currentMessage().startswith("gone.png is no longer in the output folder")
    assert window.files.paths() == []


def test_before_the_first_frame_the_numbers_say_no_frame_yet(qtbot):
    """No rate, no latency and no "last frame 5 s ago" before any frame came: one plain "no frame yet"."""
    from app.runs.station.stats import StationStats
    from app.ui.widgets.station_view import StationView

    view = StationView()
    qtbot.addWidget(view)
    view.show_stats(StationStats(since_frame_s=5.0), ())
    text = view.numbers.text()
    assert text.startswith("no frame yet") and "waiting 5 s" in text, text
    assert "–" not in text and "last frame" not in text and "frames/s" not in text, text
    view.show_stats(StationStats(frames=1, fps=2.0, latency_p50_ms=40.2, latency_p95_ms=61.0, since_frame_s=1.0), ())
    assert view.numbers.text() == ("2.0 frames/s\nlatency p50 40 ms · p95 61 ms\n"
                                   "1 frame   0 dropped   last frame 1 s ago")
