"""The station loop (app.runs.station.run) over a watch folder with the bundled anomaly demo model and a REVIEW band,
the
log sink and the output-folder sink: each file judged once as the limits say, NG/REVIEW copies, retention, an ERROR
line for a broken image, a failing sink that does not stop the others, and no file twice across a restart."""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path

import pytest
from waiting import until

from app.inference.decide.verdict import image_score, verdict_of
from app.inference.image.pipeline import run_path
from app.inference.runtime.session import open_session
from app.runs.station.file import parse_station
from app.runs.station.run import Station, StationRefused
from app.runs.station.setup import open_station, source_opener, station_spec
from app.runs.station.sinks import StationVerdict
from app.runs.station.sinks.options import FolderSinkOptions, MqttSinkOptions

REPO = Path(__file__).resolve().parents[3]
SAMPLES = REPO / "resources" / "samples" / "anomaly"
BAND = {"fail_if": [{"score_above": 0.88}], "review_if": [{"score_above": 0.56}]}
WAIT_S = 90.0  # generous: a loaded 2-core machine; the test never asserts timing


def _station_file(tmp_path: Path, **sinks: dict[str, object]):
    (tmp_path / "in").mkdir(exist_ok=True)
    values = {"name": "line-3", "model": str(REPO / "models" / "surface_anomaly.onnx"), "device": "cpu",
              "verdict": BAND, "source": {"watch": "in", "settle_s": 0.2}, "out": "out",
              "sinks": sinks or {"log": {}, "folder": {}}}
    return parse_station(values, path=None, base=tmp_path)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    station = _station_file(tmp_path_factory.mktemp("spec"))
    return open_session(station_spec(station), "cpu")


@pytest.fixture(scope="module")
def expected(model):
    """Each sample's verdict and score, judged directly by the pipeline under the same band."""
    found = {}
    for path in sorted(SAMPLES.glob("*.png")):
        result = run_path(model, path)
        found[path.name] = (verdict_of(model.spec, result).state, image_score(result))
    assert {state for state, _ in found.values()} == {"OK", "REVIEW", "NG"}  # the band splits the samples three ways
    return found


class _Running:
    """A station on its own thread, stopped and joined at the end."""

    def __init__(self, station: Station) -> None:
        self.station = station
        self.result = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        self.result = self.station.run()

    def stop(self):
        self.station.stop()
        self.thread.join(WAIT_S)
        assert not self.thread.is_alive()
        return self.result


def _drop(folder: Path, source: Path, name: str | None = None) -> None:
    """Written beside, then renamed in (complete at once)."""
    target = folder / (name or source.name)
    partial = target.with_name(target.name + ".tmp")
    shutil.copyfile(source, partial)
    partial.rename(target)


def _lines(out: Path) -> list[dict]:
    path = out / "verdicts.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _wait_for(out: Path, count: int) -> list[dict]:
    """The log's lines once `count` verdicts are in it."""
    return until(lambda: (lines := _lines(out))[count - 1:] and lines, what=f"{count} verdicts logged",
                 within_s=WAIT_S)


LAST = "zzzz-last.png"  # sorts after every sample's name


def _judged_through_last(folder: Path, out: Path) -> None:
    """Drop a last part and wait for its line: moved in, it is complete at once, and yielded after anything the
    source had ready with it (its name sorts last); frames are logged in order. So a file the station was to judge
    (again) before it has its line by then."""
    _drop(folder, SAMPLES / "anomaly_clean_02_plastic.png", LAST)
    until(lambda: LAST in [line["id"] for line in _lines(out)], what=f"{LAST} logged", within_s=WAIT_S)


def test_each_file_judged_once_as_the_limits_say_with_copies_and_pictures(tmp_path, model, expected):
    station_file = _station_file(tmp_path)
    running = _Running(open_station(station_file, model=model))
    for path in sorted(SAMPLES.glob("*.png")):
        _drop(station_file.source.target, path)
    lines = _wait_for(station_file.out, len(expected))
    stats = running.stop()

    assert sorted(line["id"] for line in lines) == sorted(expected)  # each once
    for line in lines:
        state, score = expected[line["id"]]
        assert (line["verdict"], line["station"]) == (state, "line-3")
        assert line["score"] == pytest.approx(score, abs=1e-6)
        assert (line["reason"] == "") == (state == "OK")
        assert line["reason"].startswith("review: score ") == (state == "REVIEW")
    out = station_file.out
    for name, (state, _) in expected.items():
        for folder in ("ng", "review"):
            copy = out / folder / name
            assert copy.exists() == (folder == state.lower()), (name, folder)
            if copy.exists():
                assert copy.read_bytes() == (SAMPLES / name).read_bytes()
        assert (out / "results" / f"{name}_mask.png").is_file() and (out / "results" / f"{name}_overlay.png").is_file()
    counts = {state: sum(s == state for s, _ in expected.values()) for state in ("OK", "REVIEW", "NG")}
    assert {k: stats.counts[k] for k in counts} == counts and stats.counts["ERROR"] == 0
    assert stats.frames == len(expected) and stats.ended == "stopped" and stats.sink_problems == ()
    assert stats.latency_p50_ms is not None and stats.latency_p95_ms >= stats.latency_p50_ms
    assert [e.id for e in _journal(out)] == [line["id"] for line in lines]  # journaled in the order published
    assert not (out / ".seglens-run.lock").exists()  # the lock held while running, released at the end


def _journal(out: Path):
    from app.runs.station.journal import JOURNAL_NAME, read_journal

    return read_journal(out / JOURNAL_NAME).entries


def test_a_broken_image_is_an_error_line_and_the_station_goes_on(tmp_path, model, expected):
    station_file = _station_file(tmp_path)
    folder = station_file.source.target
    running = _Running(open_station(station_file, model=model))
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"\x89PNG\r\n\x1a\n" + b"not really a picture" * 10)
    _drop(folder, broken)
    _wait_for(station_file.out, 1)
    _drop(folder, SAMPLES / "anomaly_05_pits.png")
    lines = _wait_for(station_file.out, 2)
    stats = running.stop()
    assert [line["id"] for line in lines] == ["broken.png", "anomaly_05_pits.png"]
    assert lines[0]["verdict"] == "ERROR" and lines[0]["score"] is None
    assert lines[0]["reason"].startswith("broken.png: ") and str(tmp_path) not in lines[0]["reason"]
    assert lines[1]["verdict"] == expected["anomaly_05_pits.png"][0]
    assert stats.counts["ERROR"] == 1 and stats.frames == 2
    assert not (station_file.out / "ng" / "broken.png").exists()  # an ERROR is no NG
    assert (station_file.out / "error" / "broken.png").read_bytes() == broken.read_bytes()  # what came, kept


def test_retention_keeps_the_newest_files_by_count(tmp_path, model, expected):
    station_file = _station_file(tmp_path, log={}, folder={"save": ["mask"], "keep_files": 3})
    folder, out = station_file.source.target, station_file.out
    running = _Running(open_station(station_file, model=model))
    names = sorted(expected)
    for name in names:
        _drop(folder, SAMPLES / name)
        _wait_for(out, names.index(name) + 1)  # one at a time: the order of the files is the order of the drops
    running.stop()
    kept = sorted(p.relative_to(out).as_posix() for sub in ("results", "ng", "review") for p in (out / sub).rglob("*")
                  if p.is_file())
    assert len(kept) == 3
    last = names[-1]
    assert f"results/{last}_mask.png" in kept  # the newest kept, the oldest removed first
    assert f"results/{names[0]}_mask.png" not in kept


class _Broken:
    """A sink with a bug: it raises on every verdict."""

    name = "broken"
    problem = None

    def publish(self, verdict: StationVerdict) -> None:
        raise RuntimeError("publishing is broken")

    def close(self) -> None:
        pass


class _Recorder:
    name = "recorder"
    problem = None

    def __init__(self) -> None:
        self.got: list[StationVerdict] = []

    def publish(self, verdict: StationVerdict) -> None:
        self.got.append(verdict)

    def close(self) -> None:
        pass


def test_a_sink_that_fails_is_a_problem_and_the_others_still_get_every_verdict(tmp_path, model):
    station_file = _station_file(tmp_path)
    recorder = _Recorder()
    station = Station(name="s", model=model, open_source=source_opener(station_file), sinks=[_Broken(), recorder],
                      out=station_file.out)
    running = _Running(station)
    for name in ("anomaly_04_scratch.png", "anomaly_clean_02_plastic.png"):
        _drop(station_file.source.target, SAMPLES / name)
    until(lambda: len(recorder.got) >= 2, what="2 verdicts recorded", within_s=WAIT_S)
    stats = running.stop()
    assert sorted(v.frame_id for v in recorder.got) == ["anomaly_04_scratch.png", "anomaly_clean_02_plastic.png"]
    assert stats.sink_problems == ("broken: RuntimeError: publishing is broken",) and stats.lost == 2


def test_a_restart_judges_no_file_twice(tmp_path, model, expected):
    station_file = _station_file(tmp_path)
    folder, out = station_file.source.target, station_file.out
    names = sorted(expected)
    first = _Running(open_station(station_file, model=model))
    for name in names[:4]:
        _drop(folder, SAMPLES / name)
    _wait_for(out, 4)
    first.stop()
    for name in names[4:]:
        _drop(folder, SAMPLES / name)  # come while no station runs
    second = _Running(open_station(station_file, model=model))
    _wait_for(out, len(names))
    _judged_through_last(folder, out)  # a file judged twice would have its line more by now
    stats = second.stop()
    assert sorted(line["id"] for line in _lines(out)) == [*names, LAST]
    assert stats.frames == len(names) - 4 + 1


def test_a_model_without_a_verdict_section_is_refused(tmp_path):
    shutil.copy(REPO / "models" / "nuclei.onnx", tmp_path / "nuclei.onnx")
    shutil.copy(REPO / "models" / "nuclei.yaml", tmp_path / "nuclei.yaml")
    spec_model = open_session(station_spec(parse_station(
        {"model": str(tmp_path / "nuclei.onnx"), "source": {"watch": "."}, "out": "out"}, path=None, base=tmp_path)),
        "cpu")
    if spec_model.spec.verdict is not None:
        pytest.skip("the nuclei model has a verdict section")
    with pytest.raises(StationRefused, match="has no verdict section: a station needs one"):
        Station(name="s", model=spec_model, open_source=lambda _: None, sinks=[], out=tmp_path / "out")


GOOD = "name: line-3\nmodel: m.onnx\nsource: {watch: in}\nout: out\n"


@pytest.mark.parametrize(("text", "message"), [
    ("name: line-3\nsource: {watch: in}\nout: out\n", "'model' is missing"),
    (GOOD + "colour: red\n", "unknown key 'colour' (expected one of: name, model, sidecar, verdict, device, "),
    ("name: line 3\nmodel: m.onnx\nsource: {watch: in}\nout: out\n", "'name' must be letters, digits, "),
    ("model: m.onnx\nsource: {watch: in, video: v.mp4}\nout: out\n", "'source' must name exactly one of "),
    ("model: m.onnx\nsource: {watch: in, realtime: true}\nout: out\n", "unknown key 'source.realtime'"),
    ("model: m.onnx\nsource: {watch: in, settle_s: -1}\nout: out\n", "'source.settle_s' must be a number >= 0, got -1"),
    ("model: m.onnx\nsource: {camera: -1}\nout: out\n", "'source.camera' must be a whole number >= 0, got -1"),
    ("model: m.onnx\nsource: {watch: in, recursive: yes please}\nout: out\n",
     "'source.recursive' must be true or false, got 'yes please'"),
    (GOOD + "device: tpu\n", "'device' must be auto, cpu, cuda or cuda:N, got 'tpu'"),
    (GOOD + "sinks: {log: {max_bytes: 10}}\n", "'sinks.log.max_bytes' must be a whole number >= 1024, got 10"),
    (GOOD + "sinks: {mqtt: {topic_prefix: a}}\n", "'sinks.mqtt.url' is missing"),
    (GOOD + "sinks: {mqtt: {url: 'http://x'}}\n", "'sinks.mqtt.url' must be mqtt://HOST[:PORT] or mqtts://"),
    (GOOD + "sinks: {mqtt: {url: 'mqtt://x', password: p}}\n", "unknown key 'sinks.mqtt.password'"),
    (GOOD + "sinks: {folder: {save: [mask, photo]}}\n", "'sinks.folder.save' must be a list of mask, overlay, "),
    (GOOD + "sinks: {folder: {keep_files: 0}}\n", "'sinks.folder.keep_files' must be a whole number >= 1, got 0"),
    (GOOD + "stall_after_s: 0\n", "'stall_after_s' must be a number > 0, got 0"),
    ("[1, 2]\n", "must be a mapping of keys (name, model, "),
    ("name: [\n", "invalid YAML at line 2"),
])
def test_a_station_file_key_that_is_wrong_is_one_line_naming_it(tmp_path, text, message):
    from app.runs.station.file import StationFileError, read_station_file

    path = tmp_path / "STATION.yaml"
    path.write_text(text)
    with pytest.raises(StationFileError) as caught:
        read_station_file(path)
    assert str(caught.value).startswith(f"{path}: ") and message in str(caught.value)


def test_a_station_file_read_whole(tmp_path):
    from app.runs.station.file import read_station_file

    path = tmp_path / "STATION.yaml"
    path.write_text("name: cell-7\nmodel: surface_anomaly\nsource: {video: 'rtsp://cam/1', realtime: false}\n"
                    "out: out\nstall_after_s: 5\nsinks:\n  mqtt: {url: 'mqtt://broker:1883', topic_prefix: plant,"
                    " password_env: MQTT_PW, tls: {ca: ca.pem}}\n  folder: {keep_bytes: 1000000}\n")
    station = read_station_file(path)
    assert (station.name, station.model, station.out, station.stall_after_s) == ("cell-7", "surface_anomaly",
                                                                                 tmp_path / "out", 5.0)
    assert (station.source.kind, station.source.target, station.source.realtime) == ("video", "rtsp://cam/1", False)
    assert station.sinks == (MqttSinkOptions(host="broker", port=1883, tls=True, prefix="plant", password_env="MQTT_PW",
                                             ca_file=tmp_path / "ca.pem"), FolderSinkOptions(keep_bytes=1000000))


def test_a_second_station_on_the_same_output_folder_is_refused_before_its_sinks_open(tmp_path, model):
    from app.errors import OutputError

    station_file = _station_file(tmp_path)
    first = _Running(open_station(station_file, model=model))
    _drop(station_file.source.target, SAMPLES / "anomaly_05_pits.png")
    _wait_for(station_file.out, 1)
    second = open_station(station_file, model=model)
    with pytest.raises(OutputError, match="another SegLens run is writing here"):
        second.run()
    assert second.sinks == ()  # its log, MQTT buffer and folder sink never touched the first one's folder
    first.stop()
    assert len(_lines(station_file.out)) == 1


def _verdict(frame_id: str, state: str, latency_ms: float = 10.0) -> StationVerdict:
    return StationVerdict(station="s", frame_id=frame_id, time=0.0, verdict=state, score=None, reason="",
                          latency_ms=latency_ms)


def test_the_numbers_are_kept_in_a_bounded_window():
    from app.runs.station.stats import Meter

    meter = Meter(window=50)
    for i in range(2000):  # a shift, quickly: the window holds the last 50, the counts all
        meter.add(_verdict(str(i), "NG" if i % 10 == 0 else "OK", latency_ms=float(i)))
    stats = meter.snapshot(dropped=3, sink_problems=())
    assert (stats.frames, stats.counts["NG"], stats.counts["OK"], stats.dropped) == (2000, 200, 1800, 3)
    assert stats.latency_p50_ms == pytest.approx(1974.5)
    assert stats.latency_p95_ms == pytest.approx(1996.55)  # 1950..1999
    assert len(meter._times) == len(meter._latencies) == 50
    assert stats.summary().startswith("2000 frames: 1800 OK, 0 REVIEW, 200 NG, 0 ERROR; ")


def test_retention_by_bytes_counts_the_files_an_earlier_run_left_oldest_first(tmp_path, model):
    import os

    from app.runs.station.sinks.folder import FolderSink, Pictures

    out = tmp_path / "out"
    old = out / "ng" / "old.png"
    old.parent.mkdir(parents=True)
    old.write_bytes(b"x" * 600)
    os.utime(old, (1, 1))  # from a run long ago
    part = tmp_path / "part.png"
    part.write_bytes(b"y" * 500)
    sink = FolderSink(out, model.spec, FolderSinkOptions(save=(), keep_bytes=1200))
    assert old.exists()  # 600 bytes: within the limit
    sink.publish_pictures(_verdict("a.png", "NG"), Pictures(part, None, None))
    assert old.exists() and (out / "ng" / "a.png").read_bytes() == b"y" * 500  # 1100 bytes
    sink.publish_pictures(_verdict("sub/b.png", "REVIEW"), Pictures(part, None, None))
    assert not old.exists() and (out / "ng" / "a.png").exists() and (out / "review" / "sub" / "b.png").exists()
    sink.publish_pictures(_verdict("c.png", "OK"), Pictures(part, None, None))  # an OK frame: no copy
    assert sorted(p.name for p in out.rglob("*.png")) == ["a.png", "b.png"] and sink.problem is None


def test_a_copy_that_cannot_be_written_is_the_folder_sinks_problem_not_an_exception(tmp_path, model):
    from app.runs.station.sinks.folder import FolderSink, Pictures

    out = tmp_path / "out"
    out.mkdir()
    (out / "ng").write_text("a file where the folder should be")
    sink = FolderSink(out, model.spec, FolderSinkOptions(save=()))
    sink.publish_pictures(_verdict("a.png", "NG"), Pictures(SAMPLES / "anomaly_05_pits.png", None, None))
    assert sink.lost == 1 and sink.problem.startswith("folder: cannot write the pictures of a frame (")
    (out / "ng").unlink()
    sink.publish_pictures(_verdict("a.png", "NG"), Pictures(SAMPLES / "anomaly_05_pits.png", None, None))
    assert sink.problem is None and (out / "ng" / "a.png").is_file()


def test_on_verdict_sees_each_frame_with_its_pixels_and_result_after_the_sinks(tmp_path, model, expected):
    station_file = _station_file(tmp_path, log={})
    seen: list[tuple[str, str, tuple[int, ...] | None, bool, int]] = []

    def look(verdict: StationVerdict, pictures) -> None:
        logged = len(_lines(station_file.out))  # the log sink took this verdict before the look
        shape = None if pictures.pixels is None else pictures.pixels.shape
        seen.append((verdict.frame_id, verdict.verdict, shape, pictures.result is not None, logged))

    running = _Running(open_station(station_file, model=model, on_verdict=look))
    names = sorted(expected)[:2]
    for name in names:
        _drop(station_file.source.target, SAMPLES / name)
    _wait_for(station_file.out, 2)
    until(lambda: len(seen) >= 2, what="2 verdicts looked at", within_s=WAIT_S)
    running.stop()
    assert sorted(frame for frame, *_ in seen) == names
    for index, (frame, state, shape, judged, logged) in enumerate(sorted(seen, key=lambda item: item[4])):
        assert state == expected[frame][0] and judged and shape is not None and len(shape) in (2, 3)
        assert logged == index + 1
