"""Station mode against a hostile user (issue 29's audit): what a station file, the disk or an input's name can do
to the station, and what must never reach its log, its MQTT payload or its messages (a password, an input's path)."""

from __future__ import annotations

import contextlib
import json
import marshal
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from waiting import until

from app.runs.station.file import StationFileError, parse_station, read_station_file
from app.runs.station.setup import open_station

GOOD = "name: line-1\nmodel: surface_anomaly\nsource: {watch: incoming}\nout: out\n"


@pytest.mark.parametrize("url", ["mqtt://op:hunter2@broker/x", "mqtts://op:hunter2@broker:88 83",
                                 "http://op:hunter2@broker", "mqtt://op:hun/ter2@broker/x"])
def test_a_refused_mqtt_url_is_one_line_without_its_password(tmp_path, url):
    # the refusal echoed the URL whole: `got mqtt://op:hunter2@broker/x`
    path = tmp_path / "STATION.yaml"
    path.write_text(GOOD + f"sinks: {{mqtt: {{url: '{url}'}}}}\n")
    with pytest.raises(StationFileError) as caught:
        read_station_file(path)
    message = str(caught.value)
    assert "'sinks.mqtt.url' must be mqtt://HOST[:PORT] or mqtts://HOST[:PORT], got " in message
    assert "ter2" not in message and "op:" not in message and "://***@broker" in message


# -- a station that runs: the bundled anomaly model on the samples --------------------------------------------------

REPO = Path(__file__).resolve().parents[3]
SAMPLES = REPO / "resources" / "samples" / "anomaly"
WAIT_S = 90.0  # generous: a loaded 2-core machine; the tests never assert timing


def _station_file(tmp_path: Path, watched: Path, **sinks: dict[str, object]):
    watched.mkdir(parents=True, exist_ok=True)
    values = {"name": "line-1", "model": str(REPO / "models" / "surface_anomaly.onnx"), "device": "cpu",
              "source": {"watch": str(watched), "settle_s": 0.2}, "out": "out", "sinks": sinks or {"log": {}}}
    return parse_station(values, path=None, base=tmp_path)


def _lines(out: Path, count: int) -> list[dict]:
    """The log's verdicts once `count` are in it."""
    path = out / "verdicts.jsonl"
    return until(lambda: (lines := _read(path))[count - 1:] and lines, what=f"{count} verdicts logged",
                 within_s=WAIT_S)


def _read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_an_error_reason_names_the_file_by_its_id_never_its_folder(tmp_path):
    # the reason kept the full path when it held a tab or two spaces (folded by one_line before the path was
    # replaced) or was cut at 300 characters: `bad\tname.png: /tmp/…/in/bad name.png: not an image` in the log
    watched = tmp_path / ("deep-" * 30) / ("folder  with\ttabs " * 5) / "in"
    station_file = _station_file(tmp_path, watched)
    station = open_station(station_file)
    runner = threading.Thread(target=station.run, daemon=True)
    runner.start()
    try:
        for name in ("bad\tname  two.png", "plain.png"):
            staged = tmp_path / "staged.tmp"
            staged.write_bytes(b"\x89PNG\r\n\x1a\n" + b"not really a picture" * 10)
            staged.rename(watched / name)
        lines = _lines(station_file.out, 2)
    finally:
        station.stop()
        runner.join(WAIT_S)
    assert {line["verdict"] for line in lines} == {"ERROR"}
    for line in lines:
        assert line["reason"].startswith(f"{line['id']}: "), line
        assert "deep-" not in line["reason"] and "tabs" not in line["reason"] and "/in/" not in line["reason"], line


def assert_no_cut_bytecode(*, since: float) -> None:
    """Every .pyc under app/ written since `since` (by anyone: others' runs rewrite theirs) loads whole."""
    for path in (REPO / "app").rglob("*.pyc"):
        with contextlib.suppress(FileNotFoundError):
            if path.stat().st_mtime >= since - 1:
                marshal.loads(path.read_bytes()[16:])  # EOFError for one cut at the limit


def _limited_disk() -> None:  # in the child: every file it writes stops at 2048 bytes (EFBIG, as a full disk)
    import resource  # POSIX only

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (2048, 2048))


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE is POSIX")
def test_a_journal_the_disk_refuses_ends_watch_with_its_summary_and_exit_1(tmp_path):
    # the station ends (a file it cannot journal would be judged again after a restart: app.runs.station.run), but
    # `watch` said `error: …` and exited 2 ("usage, a station file or a model error: nothing was judged") without
    # the summary of what it had judged
    watched = tmp_path / "in"
    watched.mkdir()
    (tmp_path / "STATION.yaml").write_text(
        f"name: line-1\nmodel: {REPO / 'models' / 'surface_anomaly.onnx'}\ndevice: cpu\n"
        "source: {watch: in, settle_s: 0.2}\nout: out\nsinks: {log: {max_bytes: 1024, keep: 100}}\n")
    # no .pyc written by the child: one cut at the limit would break the next import of that module for everyone
    # (importlib writes a short one whole-looking; app.paths.cache_own_bytecode would have it write them)
    started = time.time()
    child = subprocess.Popen(
        [sys.executable, "-B", "-c", "import sys, app.paths; app.paths.cache_own_bytecode = lambda: None; "
         "from app.cli import main; sys.exit(main(sys.argv[1:]))", "watch", str(tmp_path / "STATION.yaml"),
         "--no-progress"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=_limited_disk, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    try:
        out = tmp_path / "out"
        until(lambda: (out / "station-journal.jsonl").exists() or child.poll() is not None, what="the station up",
              within_s=WAIT_S)
        for number in range(40):  # ERROR verdicts (not images): each a journal line of ~110 bytes
            staged = tmp_path / "staged.tmp"
            staged.write_bytes(b"not an image")
            staged.rename(watched / f"part-{number:02d}.png")
        stdout, stderr = child.communicate(timeout=WAIT_S)  # it ends by itself once the journal is refused
    finally:
        child.kill()
    assert_no_cut_bytecode(since=started)
    assert child.returncode == 1, stdout + stderr
    assert "Traceback" not in stderr and "error:" not in stderr, stderr
    first = stdout.splitlines()[0]
    assert re.fullmatch(r"watch line-1: .*station-journal\.jsonl: cannot write the station journal \(File too "
                        r"large\); (\d+) frames: 0 OK, 0 REVIEW, 0 NG, \1 ERROR; .*", first), stdout
    assert stdout.splitlines()[-1] == f"verdicts and pictures in {out}"


@pytest.mark.parametrize(("verdict", "message"), [
    ("{fail_if: []}", "'verdict.fail_if' must be a rule or a list of 1 to 64 rules, got []"),
    ("{fail_if: [{score_above: .nan}]}", "'verdict.fail_if[0].score_above' must be a finite number, got nan")])
def test_a_bad_verdict_in_a_station_file_names_the_station_file(tmp_path, verdict, message):
    # it named the temporary merged sidecar: `/tmp/seglens-station-ofl1vsix/station-sidecar.yaml: 'verdict.fail_if' …`
    from app.errors import SegLensError
    from app.runs.station.setup import station_spec

    path = tmp_path / "STATION.yaml"
    path.write_text(GOOD + f"verdict: {verdict}\n")
    with pytest.raises(SegLensError) as caught:
        station_spec(read_station_file(path))
    assert str(caught.value) == f"{path}: {message}"


@pytest.fixture
def triggered_camera():
    """An MJPEG camera on loopback that sends a frame per part: 3 parts, 6.5 s without one, 3 more, then quiet."""
    import numpy as np

    from tests.station_fixtures import mjpeg_camera

    frames = [np.full((48, 64, 3), 40 * number, np.uint8) for number in range(6)]
    # no part for 6.5 s before the fourth: longer than the source's default 5 s
    with mjpeg_camera(frames, gap_s=0.3, pauses={3: 6.5}, hold_s=60) as url:
        yield url


def test_a_camera_quiet_between_parts_goes_on_until_the_stations_own_stall_after_s(tmp_path, triggered_camera):
    # the video source ended `stalled` after its own 5 s whatever the station file's stall_after_s said: a camera
    # triggered per part ended the station (exit 1) at the first pause between parts
    values = {"name": "line-1", "model": str(REPO / "models" / "surface_anomaly.onnx"), "device": "cpu",
              "source": {"video": triggered_camera}, "out": "out", "stall_after_s": 20, "sinks": {"log": {}}}
    station = open_station(parse_station(values, path=None, base=tmp_path))
    runner = threading.Thread(target=station.run, daemon=True)
    runner.start()
    try:
        until(lambda: station.stats().frames + station.stats().dropped >= 6 or not runner.is_alive(),
              what="6 frames judged or dropped", within_s=WAIT_S, every_s=0.1)
        alive = runner.is_alive()
    finally:
        station.stop()
        runner.join(WAIT_S)
    stats = station.stats()
    assert alive, stats.ended
    assert stats.frames + stats.dropped == 6 and stats.ended == "stopped"


@pytest.mark.parametrize(("sinks", "message"), [
    ("{}", "'sinks' names none: the verdicts would reach nobody (give log, mqtt, folder or opcua)"),
    ("{log: {jsonl: false, csv: false}}", "'sinks.log' writes neither jsonl nor csv: give one of them"),
])
def test_a_station_that_tells_nobody_is_refused(tmp_path, sinks, message):
    # it ran, judged every part and told no one (exit 0 for a video played through: every sink took every verdict)
    path = tmp_path / "STATION.yaml"
    path.write_text(GOOD + f"sinks: {sinks}\n")
    with pytest.raises(StationFileError) as caught:
        read_station_file(path)
    assert str(caught.value) == f"{path}: {message}"
