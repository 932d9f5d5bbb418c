"""A station file read into typed records (app.runs.station.file): its `verdict:` as checked rules (resolved against
the model's classes by the spec builder, with no sidecar written on the way), and its GenICam camera source opened
through its extra (app.runs.station.setup)."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

from app.errors import MissingExtra, SegLensError, extra_line
from app.inference.model.rules import AreaRule, ScoreRule, VerdictRules
from app.runs.station.file import SourceSpec, StationFileError, parse_station, read_station_file
from app.runs.station.setup import source_opener, station_spec

REPO = Path(__file__).resolve().parents[3]
MODELS = REPO / "models"
GOOD = "name: line-1\nmodel: surface_anomaly\nsource: {watch: incoming}\nout: out\n"


def _station(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "STATION.yaml"
    path.write_text(text)
    return path


def test_the_verdict_is_read_into_checked_rules_when_the_file_is_read(tmp_path):
    # it was the YAML mapping as written, {'fail_if': [{'score_above': 0.9}], …}, checked only when the model loaded
    path = _station(tmp_path, GOOD + "verdict: {fail_if: [{score_above: 0.9}], review_if: {score_above: 0.5}}\n")
    station = read_station_file(path)
    assert station.verdict == VerdictRules(fail_if=({"kind": "score_above", "limit": 0.9},),
                                           review_if=({"kind": "score_above", "limit": 0.5},), source=str(path))


@pytest.mark.parametrize(("verdict", "message"), [
    ("{fail_if: []}", "'verdict.fail_if' must be a rule or a list of 1 to 64 rules, got []"),
    ("{review_if: [{class: a, min_area_px: 0}]}", "'verdict.review_if[0].min_area_px' must be a whole number from 1"),
    ("{fail_if: {score_above: 0.5, class: a}}", "'verdict.fail_if[0]' has unknown key 'class'"),
    ("{calibrated: {}}", "unknown key 'verdict.calibrated' (expected one of: fail_if, review_if)")])
def test_a_bad_verdict_is_refused_when_the_file_is_read(tmp_path, verdict, message):
    # the file was read, and the rules refused only once the model was loaded (or never, until a station started)
    path = _station(tmp_path, GOOD + f"verdict: {verdict}\n")
    with pytest.raises(StationFileError) as caught:
        read_station_file(path)
    assert str(caught.value).startswith(f"{path}: {message}")


def test_the_station_verdict_replaces_the_sidecars_and_the_spec_keeps_the_real_sidecar(tmp_path):
    # the spec's sidecar was the temporary merged file, deleted as soon as the spec was built
    path = _station(tmp_path, GOOD + "verdict: {fail_if: {score_above: 0.9}}\n")
    spec = station_spec(read_station_file(path))
    assert spec.verdict == (ScoreRule(0.9),)  # not the sidecar's image_threshold rule (score >= 0.785)
    assert spec.sidecar == MODELS / "surface_anomaly.yaml"
    assert spec.output.image_threshold == pytest.approx(0.5)  # the threshold of the replaced rule is not used


def test_a_class_the_model_lacks_is_refused_naming_the_station_file(tmp_path):
    path = _station(tmp_path, "model: surface_defects\nsource: {watch: in}\nout: out\n"
                              "verdict: {fail_if: [{class: dent, min_area_px: 5}]}\n")
    with pytest.raises(SegLensError) as caught:
        station_spec(read_station_file(path))
    assert str(caught.value) == (f"{path}: 'verdict.fail_if[0].class' is 'dent', not a class of this model "
                                 "(classes: background, scratch, pit, stain)")


def test_a_station_verdict_over_a_sidecar_with_a_classes_file(tmp_path):
    # refused: the merged temporary sidecar could not reach the classes file beside the real one
    sidecar = (MODELS / "surface_defects.yaml").read_text()
    classes = sidecar.index("classes:")
    (tmp_path / "defects.yaml").write_text(sidecar[:classes] + "classes_file: names.txt\n"
                                           + sidecar[sidecar.index("postprocess:"):])
    (tmp_path / "names.txt").write_text("background\nscratch\npit\nstain\n")
    path = _station(tmp_path, f"model: {MODELS / 'surface_defects.onnx'}\nsidecar: defects.yaml\n"
                              "source: {watch: in}\nout: out\nverdict: {fail_if: [{class: pit, min_area_px: 5}]}\n")
    spec = station_spec(read_station_file(path))
    assert spec.verdict == (AreaRule("pit", (2,), 5),)
    assert spec.classes_file == tmp_path / "names.txt"


# -- a GenICam camera ------------------------------------------------------------------------------------------------

def test_a_genicam_source_is_read_into_its_record(tmp_path):
    station = parse_station({"model": "surface_anomaly", "out": "out", "source": {
        "genicam": "vendor.cti", "device": "SN-42", "features": {"PixelFormat": "Mono8", "ExposureTime": 2000.0}}},
        path=None, base=tmp_path)
    assert station.source == SourceSpec("genicam", tmp_path / "vendor.cti", device="SN-42",
                                        features=(("PixelFormat", "Mono8"), ("ExposureTime", 2000.0)))
    assert parse_station({"model": "m.onnx", "out": "o", "source": {"genicam": "v.cti"}}, path=None,
                         base=tmp_path).source.device == 0


@pytest.mark.parametrize(("source", "message"), [
    ("{genicam: v.cti, device: -1}", "'source.device' must be a whole number >= 0, got -1"),
    ("{genicam: v.cti, features: [Mono8]}", "'source.features' must be a mapping of up to 64 GenICam features"),
    ("{genicam: v.cti, features: {Gain: [1]}}", "'source.features.Gain' must be a text, a number or true/false, "
                                                "got a list"),
    ("{genicam: v.cti, realtime: true}", "unknown key 'source.realtime' (expected one of: genicam, device, "
                                         "features)")])
def test_a_bad_genicam_source_is_one_line_naming_the_key(tmp_path, source, message):
    path = _station(tmp_path, f"model: surface_anomaly\nout: out\nsource: {source}\n")
    with pytest.raises(StationFileError) as caught:
        read_station_file(path)
    assert str(caught.value).startswith(f"{path}: {message}")


def test_a_genicam_source_without_harvesters_is_the_extras_one_line(tmp_path, monkeypatch):
    # a station file could not name a GenICam camera at all
    monkeypatch.setitem(sys.modules, "harvesters", None)  # not installed, as far as finding it goes
    (tmp_path / "vendor.cti").write_bytes(b"")
    station = parse_station({"model": "surface_anomaly", "out": "out", "source": {"genicam": "vendor.cti"}},
                            path=None, base=tmp_path)
    with pytest.raises(MissingExtra) as caught:
        source_opener(station)(None)
    assert str(caught.value) == extra_line(feature="a GenICam camera", extra="genicam")


def test_a_station_genicam_camera_gives_frames_and_its_stall_limit():
    pytest.importorskip("harvesters.core")
    from app.io.sources.genicam import simulator_cti

    simulator = simulator_cti()
    if simulator is None:
        pytest.skip("the genicam package's Viky simulator is not installed")
    station = parse_station({"model": "surface_anomaly", "out": "out", "stall_after_s": 7, "source": {
        "genicam": str(simulator), "device": 0, "features": {"PixelFormat": "Mono8"}}},
        path=None, base=simulator.parent)
    source = source_opener(station)(None)
    timer = threading.Timer(30.0, source.close)  # a guard only: the first frame closes it
    timer.start()
    try:
        frame = next(iter(source))
    finally:
        source.close()
        timer.cancel()
    assert frame.pixels.ndim == 3 and frame.pixels.shape[2] == 3
    assert source.stall_s == 7.0
