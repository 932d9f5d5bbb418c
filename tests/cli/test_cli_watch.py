"""seglens-cli watch end to end in a subprocess: start on a watched folder with the anomaly demo model and a REVIEW
band, drop 5 files, SIGINT → exit 130 with the summary line, nothing half-written; a station file; usage errors."""

from __future__ import annotations

import csv
import json
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from waiting import until

from app.cli import main
from app.io.files import TEMPORARY_PREFIX, is_complete_png
from tests.station_fixtures import Subscriber, mosquitto

__all__ = ["mosquitto"]  # the broker fixture, imported for the MQTT test below

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "resources" / "samples" / "anomaly"
WAIT_S = 120.0  # generous: a loaded 2-core machine; timing is never asserted


@pytest.fixture
def demo(tmp_path):
    """The anomaly demo model with a sidecar whose verdict has a REVIEW band."""
    shutil.copy(REPO / "models" / "surface_anomaly.onnx", tmp_path / "surface_anomaly.onnx")
    sidecar = yaml.safe_load((REPO / "models" / "surface_anomaly.yaml").read_text())
    sidecar["output"].pop("image_threshold")
    sidecar["verdict"] = {"fail_if": [{"score_above": 0.88}], "review_if": [{"score_above": 0.56}]}
    (tmp_path / "surface_anomaly.yaml").write_text(yaml.safe_dump(sidecar, sort_keys=False))
    return tmp_path / "surface_anomaly.onnx"


def _drop(folder: Path, source: Path) -> None:
    partial = folder / (source.name + ".tmp")
    shutil.copyfile(source, partial)
    partial.rename(folder / source.name)


def _up(process: subprocess.Popen[str], out: Path) -> None:
    """Wait until the station opened its journal (it is up) or the process ended (the test's assert says why)."""
    until(lambda: (out / "station-journal.jsonl").exists() or process.poll() is not None, what="the station up",
          within_s=WAIT_S)


def _logged(out: Path) -> list[dict]:
    path = out / "verdicts.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _start(args: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "app.cli", "watch", *args], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _stop(process: subprocess.Popen[str]) -> tuple[int, str, str]:
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=WAIT_S)
    return process.returncode, out, err


def test_watch_five_files_then_ctrl_c_ends_with_130_and_the_summary(demo, tmp_path):
    folder, out = tmp_path / "in", tmp_path / "out"
    folder.mkdir()
    process = _start([str(demo), str(folder), "--out", str(out), "--device", "cpu", "--settle", "0.2",
                      "--name", "line-3"])
    try:
        _up(process, out)
        assert process.poll() is None, process.communicate()
        names = sorted(p.name for p in SAMPLES.glob("*.png"))[:5]
        for name in names:
            _drop(folder, SAMPLES / name)
        until(lambda: len(_logged(out)) >= 5, what="5 verdicts", within_s=WAIT_S)
    finally:
        code, stdout, stderr = _stop(process)
    assert code == 130, (stdout, stderr)
    lines = _logged(out)
    assert sorted(line["id"] for line in lines) == names
    counts = {state: sum(line["verdict"] == state for line in lines) for state in ("OK", "REVIEW", "NG", "ERROR")}
    summary = ", ".join(f"{counts[s]} {s}" for s in ("OK", "REVIEW", "NG", "ERROR"))
    assert f"watch line-3: stopped; 5 frames: {summary}; " in stdout, stdout
    assert "; 0 dropped\n" in stdout and "latency p50 " in stdout and "sink problem" not in stdout
    assert "Traceback" not in stderr
    # nothing half-written: no temporaries, every picture whole, every log line whole, the lock released
    assert not [p for p in out.rglob("*") if p.name.startswith(TEMPORARY_PREFIX)]
    pictures = list((out / "results").rglob("*.png"))
    assert len(pictures) == 10 and all(is_complete_png(p) for p in pictures)  # mask + overlay each
    with (out / "verdicts.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [row["id"] for row in rows] == [line["id"] for line in lines]
    assert not (out / ".seglens-run.lock").exists()
    for line in lines:
        copy = out / line["verdict"].lower() / line["id"]
        assert copy.exists() == (line["verdict"] in ("NG", "REVIEW"))


def test_a_station_file_is_run_and_its_bad_key_is_one_line(demo, tmp_path, capsys):
    (tmp_path / "in").mkdir()
    station = tmp_path / "STATION.yaml"
    station.write_text(f"name: cell-7\nmodel: {demo.name}\nsource: {{watch: in, settle_s: soon}}\nout: out\n")
    assert main(["watch", str(station)]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {station}: 'source.settle_s' must be a number >= 0, got 'soon'\n"

    station.write_text(f"name: cell-7\nmodel: {demo.name}\ndevice: cpu\nsource: {{watch: in, settle_s: 0.2}}\n"
                       "out: out\nsinks: {log: {}, folder: {keep_files: 4}}\n")
    process = _start([str(station)])
    try:
        _up(process, tmp_path / "out")
        _drop(tmp_path / "in", SAMPLES / "anomaly_05_pits.png")
        until(lambda: len(_logged(tmp_path / "out")) >= 1, what="a verdict", within_s=WAIT_S)
    finally:
        code, stdout, stderr = _stop(process)
    assert code == 130, (stdout, stderr)
    assert "watch cell-7: stopped; 1 frame: 0 OK, 0 REVIEW, 1 NG, 0 ERROR; " in stdout
    assert (tmp_path / "out" / "ng" / "anomaly_05_pits.png").is_file()


@pytest.mark.parametrize(("args", "message"), [
    (["model.onnx"], "model.onnx: give a station file (.yaml), or MODEL SOURCE --out DIR"),
    (["surface_anomaly", "in"], "watch MODEL SOURCE needs --out DIR"),
    (["STATION.yaml", "--out", "x"], "--out: a station file says these itself"),
    (["surface_anomaly", "camera:x", "--out", "o"], "'source.camera' must be a whole number >= 0, got 'x'"),
    (["surface_anomaly", "camera:0", "--out", "o", "--stall", "0"], "'stall_after_s' must be a number > 0, got 0"),
    (["STATION.yaml", "--anonymize"], "--[no-]anonymize: a station file says these itself"),
])
def test_usage_errors_are_one_line_and_exit_2(tmp_path, monkeypatch, capsys, args, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in").mkdir()
    assert main(["watch", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1


def test_a_video_file_played_to_its_end_exits_0_with_every_frame_judged_or_counted_dropped(demo, tmp_path, capsys):
    import cv2

    video = tmp_path / "parts.avi"
    frames = [cv2.imread(str(p)) for p in sorted(SAMPLES.glob("*.png"))[:5]]
    height, width = frames[0].shape[:2]
    writer = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"FFV1"), 5, (width, height))
    for frame in frames:
        writer.write(cv2.resize(frame, (width, height)))
    writer.release()
    code = main(["watch", str(demo), str(video), "--out", str(tmp_path / "out"), "--device", "cpu",
                 "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0, out
    judged = len(_logged(tmp_path / "out"))
    found = re.search(r"^watch station: .*parts.avi: end of the video \(5 frames\); (\d+) frames?: .*; (\d+) dropped$",
                      out, re.M)
    assert found, out
    assert int(found[1]) == judged and judged + int(found[2]) == 5  # newest wins: a frame is judged or counted


def test_watch_with_mqtt_publishes_every_verdict_once_in_the_order_logged(demo, tmp_path, mosquitto):
    folder, out = tmp_path / "in", tmp_path / "out"
    folder.mkdir()
    subscriber = Subscriber(mosquitto.port, "seglens/line-3/verdict")
    process = _start([str(demo), str(folder), "--out", str(out), "--device", "cpu", "--settle", "0.2",
                      "--name", "line-3", "--mqtt", f"mqtt://127.0.0.1:{mosquitto.port}"])
    try:
        _up(process, out)
        names = sorted(p.name for p in SAMPLES.glob("*.png"))[:4]
        for name in names:
            _drop(folder, SAMPLES / name)
        until(lambda: len(_logged(out)) >= 4, what="4 verdicts", within_s=WAIT_S)
        messages = subscriber.wait_for(4, timeout=WAIT_S)
    finally:
        code, stdout, stderr = _stop(process)
        subscriber.close()
    assert code == 130, (stdout, stderr)
    logged = _logged(out)
    assert [(m["frame_id"], m["verdict"], m["station"]) for _, m, _ in messages] == \
        [(line["id"], line["verdict"], line["station"]) for line in logged]
    assert [m["seq"] for _, m, _ in messages] == sorted({m["seq"] for _, m, _ in messages})  # once each, in order
    assert "sink problem" not in stdout


def test_stall_gives_the_station_its_stall_after_s():
    # there was no way to give `watch MODEL camera:N` more than the source's own 5 s between two frames
    import argparse

    from app.cli import build_parser
    from app.cli.watch import _station_file

    args = build_parser().parse_args(["watch", "surface_anomaly", "rtsp://cam/1", "--out", "o", "--stall", "120"])
    assert isinstance(args, argparse.Namespace) and _station_file(args).stall_after_s == 120


@pytest.mark.parametrize(("flags", "anonymize"), [([], None), (["--anonymize"], True), (["--no-anonymize"], False)])
def test_anonymize_gives_the_station_its_anonymize(flags, anonymize):
    # a station had no --anonymize: a file named after a patient was its id in every output (app.runs.station.privacy)
    from app.cli import build_parser
    from app.cli.watch import _station_file

    args = build_parser().parse_args(["watch", "surface_anomaly", "rtsp://cam/1", "--out", "o", *flags])
    assert _station_file(args).anonymize is anonymize
