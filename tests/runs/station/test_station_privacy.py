"""A station's outputs under `anonymize` (app.runs.station.privacy): a file named after a patient, or a DICOM naming
one, leaves no name, no patient name and no PatientID in anything under the output folder but the station's own
journal, nor in the MQTT payloads; a DICOM's copy is de-identified; a DICOM frame gets its pseudonym even in a
station that does not say `anonymize`, unless the station file turns it off."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pydicom
import pytest
from waiting import until

from app.inference.runtime.session import open_session
from app.runs.privacy.names import pseudonymous_path
from app.runs.privacy.pseudonyms import pseudonym_key
from app.runs.station.file import StationFileError, parse_station
from app.runs.station.journal import JOURNAL_NAME
from app.runs.station.setup import open_station, station_spec
from app.runs.station.sinks.options import FolderSinkOptions
from tests.dicom_factory import write_series
from tests.station_fixtures import Mosquitto, Subscriber, mosquitto

__all__ = ["mosquitto"]  # the fixture

REPO = Path(__file__).resolve().parents[3]
SAMPLE = REPO / "resources" / "samples" / "anomaly" / "anomaly_05_pits.png"
EVERY_PART_NG = {"fail_if": [{"score_above": 0.0}]}  # so every judged frame is copied
# the ID's number is long enough not to turn up by chance: a copy's new UIDs are random digits ("7734" did, once)
PATIENT = ("Smith^John", "PID-77348261")
SECRETS = (b"smith", b"john", b"pid-77348261", b"77348261")
WAIT_S = 90.0


def _station_file(tmp_path: Path, sinks: dict[str, object] | None = None, **top: object):
    (tmp_path / "in").mkdir(exist_ok=True)
    values = {"name": "ward-2", "model": str(REPO / "models" / "surface_anomaly.onnx"), "device": "cpu",
              "verdict": EVERY_PART_NG, "source": {"watch": "in", "settle_s": 0.2}, "out": "out",
              "sinks": sinks or {"log": {}, "folder": {}}, **top}
    return parse_station(values, path=None, base=tmp_path)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return open_session(station_spec(_station_file(tmp_path_factory.mktemp("spec"))), "cpu")


def _drop(folder: Path, data: bytes, name: str) -> None:
    partial = folder / f"{name}.tmp"
    partial.write_bytes(data)
    partial.rename(folder / name)


def _dicom(tmp_path: Path) -> bytes:
    path = write_series(tmp_path / "made", slices=1, name="ct", patient=PATIENT)[0]
    return path.read_bytes()


def _lines(out: Path, count: int) -> list[dict]:
    """The log's verdicts once `count` are in it."""
    path = out / "verdicts.jsonl"
    return until(lambda: (lines := _read(path))[count - 1:] and lines, what=f"{count} verdicts logged",
                 within_s=WAIT_S)


def _read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _run(station_file, model, drops: list[tuple[bytes, str]]) -> list[dict]:
    station = open_station(station_file, model=model)
    thread = threading.Thread(target=station.run, daemon=True)
    thread.start()
    try:
        for data, name in drops:
            _drop(station_file.source.target, data, name)
        return _lines(station_file.out, len(drops))
    finally:
        station.stop()
        thread.join(WAIT_S)
        assert not thread.is_alive()


def _found(out: Path) -> list[str]:
    """Every place under `out` (a name or a file's bytes, the journal excepted) that holds a patient's word."""
    found = []
    for path in out.rglob("*"):
        rel = path.relative_to(out).as_posix()
        if any(secret.decode() in rel.lower() for secret in SECRETS):
            found.append(f"name {rel}")
        if path.is_file() and path.name != JOURNAL_NAME:
            data = path.read_bytes().lower()
            found += [f"{rel} holds {secret.decode()}" for secret in SECRETS if secret in data]
    return found


def test_under_anonymize_no_patient_word_leaves_the_station(tmp_path: Path, model, mosquitto: Mosquitto) -> None:
    station_file = _station_file(tmp_path, {"log": {}, "folder": {},
                                            "mqtt": {"url": f"mqtt://127.0.0.1:{mosquitto.port}"}}, anonymize=True)
    subscriber = Subscriber(mosquitto.port, "seglens/ward-2/verdict")
    drops = [(SAMPLE.read_bytes(), "Smith^John_CT.png"), (_dicom(tmp_path), "Smith^John_CT.dcm"),
             (b"\x89PNG\r\n\x1a\n" + b"not a picture " * 20, "Smith^John_CT_broken.png")]
    try:
        lines = _run(station_file, model, drops)
        payloads = [payload for _, payload, _ in subscriber.wait_for(len(drops))]
    finally:
        subscriber.close()
    out = station_file.out
    assert _found(out) == []
    assert len(payloads) == len(drops)
    assert not [p for p in payloads if any(s.decode() in json.dumps(p).lower() for s in SECRETS)]
    key = pseudonym_key()
    names = {f"{pseudonymous_path(name, key)}{Path(name).suffix}": name for _, name in drops}
    assert sorted(line["id"] for line in lines) == sorted(names)  # the input's keyed pseudonym, as run names it
    by_name = {names[line["id"]]: line for line in lines}
    broken = by_name["Smith^John_CT_broken.png"]
    assert broken["verdict"] == "ERROR" and broken["reason"].startswith(broken["id"] + ": ")
    error_copy = out / "error" / broken["id"]
    assert error_copy.read_bytes() == drops[2][0]  # an image's copy is byte for byte, under its pseudonym
    dicom_line = by_name["Smith^John_CT.dcm"]
    copy = out / ("error" if dicom_line["verdict"] == "ERROR" else "ng") / dicom_line["id"]
    dataset = pydicom.dcmread(copy)
    assert str(dataset.PatientName).startswith("anon-") and dataset.PatientIdentityRemoved == "YES"
    assert (out / "ng" / by_name["Smith^John_CT.png"]["id"]).read_bytes() == SAMPLE.read_bytes()
    journal = (out / JOURNAL_NAME).read_text()
    assert "Smith^John_CT.png" in journal  # the station's own state keeps the real name (docs/SECURITY.md)


def test_a_dicom_gets_its_pseudonym_in_a_station_that_does_not_say_anonymize(tmp_path: Path, model) -> None:
    # a hospital's DICOM in a station set up for parts: its name and patient are no more shared than run shares them
    station_file = _station_file(tmp_path)
    assert station_file.anonymize is None
    lines = _run(station_file, model, [(_dicom(tmp_path), "Smith^John_CT.dcm"), (SAMPLE.read_bytes(), "part-7.png")])
    ids = sorted(line["id"] for line in lines)
    assert ids == sorted([f"{pseudonymous_path('Smith^John_CT.dcm', pseudonym_key())}.dcm", "part-7.png"])
    assert _found(station_file.out) == []


def test_anonymize_false_keeps_every_name(tmp_path: Path, model) -> None:
    # an industrial CT line's DICOM (DICONDE) names no patient: the station file may say so
    station_file = _station_file(tmp_path, anonymize=False)
    data = _dicom(tmp_path)
    lines = _run(station_file, model, [(data, "weld-17.dcm")])
    assert [line["id"] for line in lines] == ["weld-17.dcm"]
    folder = "error" if lines[0]["verdict"] == "ERROR" else "ng"
    assert (station_file.out / folder / "weld-17.dcm").read_bytes() == data  # byte for byte, as before


def test_the_anonymize_key_is_true_or_false(tmp_path: Path) -> None:
    with pytest.raises(StationFileError, match=r"^'anonymize' must be true or false, got 'yes'$"):
        _station_file(tmp_path, anonymize="yes")


def test_a_broken_key_is_one_line_before_anything_runs(tmp_path: Path, model, monkeypatch) -> None:
    monkeypatch.setenv("SEGLENS_PSEUDONYM_KEY", "short")
    from app.runs.privacy.pseudonyms import PseudonymKeyError

    with pytest.raises(PseudonymKeyError, match="SEGLENS_PSEUDONYM_KEY is not a usable key"):
        open_station(_station_file(tmp_path, anonymize=True), model=model)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def _frame(tmp_path: Path, name: str, data: bytes):
    from app.io.sources import Frame

    path = tmp_path / "in" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return Frame(name, 0.0, path=path, size=len(data), mtime_ns=0)


def test_an_error_line_that_still_names_the_input_is_withheld(tmp_path: Path) -> None:
    from app.runs.station.privacy import StationPrivacy

    privacy = StationPrivacy(True, b"k" * 32)
    frame = _frame(tmp_path, "ward/Smith^John_CT.png", b"x")
    name, reason = privacy.outward(frame, "ERROR", "ward/Smith^John_CT.png: cannot read Smith^John_CT.png (EOF)")
    assert name.startswith("images/img-") and name.endswith(".png")
    assert reason == (f"{name}: could not be judged (the message named the input or its patient; withheld under "
                      "anonymize)")
    assert privacy.outward(frame, "ERROR", "ward/Smith^John_CT.png: not an image") == (name, f"{name}: not an image")
    assert privacy.outward(frame, "NG", "score 0.9 > 0.5") == (name, "score 0.9 > 0.5")
    camera = type(frame)("17", 0.0, pixels=b"x")  # type: ignore[arg-type]
    assert privacy.outward(camera, "ERROR", "17: no") == ("17", "17: no")  # a counter names nobody


def test_what_a_private_copy_may_keep(tmp_path: Path) -> None:
    from app.runs.station.privacy import StationPrivacy

    privacy = StationPrivacy(None, b"k" * 32)
    assert privacy.shareable(Path("scan.nii.gz"), b"\x5c\x01") is None  # a NIfTI header is not de-identified
    assert privacy.shareable(Path("part.png"), b"png").data == b"png"  # an image as it is
    assert privacy.shareable(Path("IM0001"), b"\0" * 128 + b"DICM broken") is None  # cannot be de-identified
    path = write_series(tmp_path, slices=1, patient=PATIENT)[0]
    dataset = pydicom.dcmread(path)
    dataset.BurnedInAnnotation = "YES"  # SegLens cannot take text out of pixels
    dataset.save_as(path)
    assert privacy.shareable(path, path.read_bytes()) is None


def test_a_folder_sink_problem_names_a_private_input_by_its_pseudonym(tmp_path: Path) -> None:
    # the problem line (the summary, the viewer's alarm) quoted the OS's message with the input's full path; an input
    # gone is no failure of the sink since issue 36: its one line beside where the copy would be names it likewise
    from app.inference.model.builder import load_spec
    from app.runs.station.privacy import StationPrivacy
    from app.runs.station.sinks import StationVerdict
    from app.runs.station.sinks.folder import FolderSink, Pictures

    out = tmp_path / "out"
    out.mkdir()
    sink = FolderSink(out, load_spec(REPO / "models" / "surface_anomaly.onnx"), FolderSinkOptions(save=()),
                      privacy=StationPrivacy(True, b"k" * 32))
    name = "images/img-0123456789abcdef.png"
    verdict = StationVerdict(station="s", frame_id=name, time=0.0, verdict="NG", score=1.0, reason="", latency_ms=0)
    sink.publish_pictures(verdict, Pictures(tmp_path / "in" / "Smith^John_CT.png", None, None))  # gone already
    assert sink.lost == 0 and sink.problem is None
    record = (out / "ng" / f"{name}.not-copied.txt").read_text()
    assert record == f"{name}: not copied: No such file or directory\n"
    (out / "ng").rename(out / "ng-aside")
    (out / "ng").write_text("a file where the folder should be")  # a write that fails: the sink's problem
    sink.publish_pictures(verdict, Pictures(tmp_path / "Smith^John_CT.png", None, None, root=tmp_path))
    assert sink.lost == 1 and sink.problem is not None
    assert "Smith" not in sink.problem, sink.problem


def test_a_private_copy_of_a_patient_named_like_seglens_words_is_kept_and_one_still_naming_her_removed(
        tmp_path: Path, caplog) -> None:
    """A DICOM's de-identified copy says how it was de-identified (CodeMeaning "Basic Application Confidentiality
    Profile", SegLens's method text): a patient called Basic^Tissue is not in those words of SegLens (issue 36: her
    copy was removed as a leak). A text of her source that names her, kept by the profile, is still one."""
    from app.inference.model.builder import load_spec
    from app.runs.station.privacy import StationPrivacy
    from app.runs.station.sinks import StationVerdict
    from app.runs.station.sinks.folder import FolderSink, Pictures

    out, watched = tmp_path / "out", tmp_path / "in"
    out.mkdir()
    sink = FolderSink(out, load_spec(REPO / "models" / "surface_anomaly.onnx"), FolderSinkOptions(save=()),
                      privacy=StationPrivacy(True, b"k" * 32))
    for name, description in (("kept", None), ("named", "Basic follow-up")):
        path = write_series(watched / name, slices=1, name="ct", patient=("Basic^Tissue", "PID-5150"))[0]
        if description:
            dataset = pydicom.dcmread(path)
            dataset.ContentDescription = description
            dataset.save_as(path)
        frame = f"images/img-{name:0>16}.dcm"
        verdict = StationVerdict(station="s", frame_id=frame, time=0.0, verdict="NG", score=1.0, reason="",
                                 latency_ms=0)
        assert sink.publish_pictures(verdict, Pictures(path, None, None, root=watched))
    copy = out / "ng" / "images" / f"img-{'kept':0>16}.dcm"
    assert copy.is_file()
    kept = pydicom.dcmread(copy)
    assert kept.PatientIdentityRemoved == "YES" and "basic" not in str(kept.PatientName).lower()
    assert "Basic Application Confidentiality Profile" in \
        [item.CodeMeaning for item in kept.DeidentificationMethodCodeSequence]
    assert not (out / "ng" / "images" / f"img-{'named':0>16}.dcm").exists()
    assert "folder sink: a de-identified copy removed (a patient name in the DICOM tags of " in caplog.text
