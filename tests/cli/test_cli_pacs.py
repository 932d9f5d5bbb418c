"""seglens-cli pacs echo | find | get | send and run --from / --send, against a real Orthanc on loopback
(tests/io/pacs/orthanc.py: skipped without Orthanc, failed in CI) holding the bundled CT sample: the study found by
patient ID (the name on the table only, never in --json or a log), its series got over DIMSE (C-GET) and DICOMweb
(WADO-RS) equal to the uploaded files, ct_demo run on it with the SEG and SC sent back and found by a query, the SEG
read back from the server referencing the stored instances frame by frame and equal to the local mask; a wrong
password, a wrong AE title and --anonymize --send to a node not marked research each one line."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import nibabel as nib
import numpy as np
import pydicom
import pytest

import app.io.pacs.cache as cache_module
from app.cli import main
from app.io.discover import discover
from tests.io.pacs.orthanc import Orthanc

CT = Path(__file__).resolve().parents[2] / "resources" / "samples" / "ct"
CT_FILES = sorted(CT.glob("IM[0-9][0-9][0-9][0-9]"))
PATIENT_ID, PATIENT_NAME = "OW-40712", "Ostrander^Wilhelmina"
STUDY = str(pydicom.dcmread(CT_FILES[0], stop_before_pixels=True).StudyInstanceUID)
SERIES = str(pydicom.dcmread(CT_FILES[0], stop_before_pixels=True).SeriesInstanceUID)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Orthanc]:
    """One Orthanc for the module, holding the CT sample."""
    orthanc = Orthanc.launch(tmp_path_factory.mktemp("orthanc"))
    try:
        orthanc.upload(CT_FILES)
        yield orthanc
    finally:
        orthanc.stop(graceful=True)


@pytest.fixture
def nodes(server: Orthanc, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The settings' nodes (ORTHANC over DIMSE, WEB over DICOMweb, RESEARCH marked research), the password in
    each DICOMweb node's own SEGLENS_PACS_SECRET_<NAME> (the plain variable goes to no node of two with auth), the
    cache in the test's folder (never the user's). Returns the cache folder."""
    settings = tmp_path / "settings.yaml"
    web = f"dicomweb+http://127.0.0.1:{server.http_port}/dicom-web?user={server.user}"
    settings.write_text(f"pacs:\n  ORTHANC: {{url: '{server.dimse_url}'}}\n  WEB: {{url: '{web}'}}\n"
                        f"  RESEARCH: {{url: '{web}', research: true}}\n", encoding="utf-8")
    monkeypatch.setenv("SEGLENS_SETTINGS", str(settings))
    monkeypatch.setenv("SEGLENS_PACS_SECRET_WEB", server.password)
    monkeypatch.setenv("SEGLENS_PACS_SECRET_RESEARCH", server.password)
    cache = tmp_path / "cache"
    monkeypatch.setattr(cache_module, "default_root", lambda: cache)
    server.start()  # (a test may have stopped it)
    return cache


def one_error(err: str) -> str:
    """The single line a failed command printed (and that it is the only one)."""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    return lines[0]


@pytest.mark.parametrize("node", ["ORTHANC", "WEB"])
def test_echo(nodes, node, capsys):
    assert main(["pacs", "echo", node]) == 0
    assert capsys.readouterr().out.startswith(f"{node}: answers (")


def test_find_by_patient_id_the_table_names_the_patient_the_json_and_the_log_do_not(nodes, capsys, caplog):
    caplog.set_level(logging.DEBUG)
    assert main(["pacs", "find", "ORTHANC", "--patient-id", PATIENT_ID, "--series"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[:3] == ["DATE", "PATIENT", "ID"]
    assert table[1].split()[1:3] == [PATIENT_ID, PATIENT_NAME] and table[1].endswith(STUDY)
    series = [line.split() for line in table[2:]]
    assert series == [["series", "1", "CT", "32", "slices", "Synthetic", "chest", "phantom", "5", "mm", SERIES]]

    assert main(["pacs", "find", "WEB", "--patient-id", PATIENT_ID, "--json", "--series"]) == 0
    out = capsys.readouterr().out
    found = json.loads(out)
    assert [(s["study_uid"], s["patient_id"], s["modalities"]) for s in found] == [(STUDY, PATIENT_ID, ["CT"])]
    assert [(s["series_uid"], s["instances"], s["modality"]) for s in found[0]["series"]] == [(SERIES, 32, "CT")]
    assert "Phantom" not in out
    assert main(["pacs", "find", "WEB", "--patient-id", "NOBODY"]) == 0
    assert capsys.readouterr().out == "no studies found\n"
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "Phantom" not in logged and PATIENT_ID not in logged


@pytest.mark.parametrize("node", ["ORTHANC", "WEB"])
def test_get_copies_the_series_equal_to_the_uploaded_files(nodes, node, tmp_path, capsys):
    target = tmp_path / "got"
    assert main(["pacs", "get", node, STUDY, "--to", str(target)]) == 0
    assert capsys.readouterr().out.endswith(f"1 of 1 series retrieved from {node}\n")
    assert [p.name for p in target.iterdir()] == [SERIES]
    got = {ds.SOPInstanceUID: ds for ds in map(pydicom.dcmread, (target / SERIES).iterdir())}
    sent = {ds.SOPInstanceUID: ds for ds in map(pydicom.dcmread, CT_FILES)}
    assert got.keys() == sent.keys()
    for uid, ds in sent.items():  # the same instance, whatever transfer syntax it travelled in
        assert np.array_equal(got[uid].pixel_array, ds.pixel_array)
        assert without_pixels(got[uid]) == without_pixels(ds)


def without_pixels(ds: pydicom.Dataset) -> dict[int, object]:
    """Every data element but the pixel data (whose encoding depends on the transfer syntax negotiated)."""
    return {int(e.tag): e.value for e in ds if e.tag != 0x7FE00010}


def test_run_from_the_pacs_sends_seg_and_sc_back_found_and_equal_to_the_local_mask(nodes, server, tmp_path, capsys):
    out = tmp_path / "out"
    code = main(["run", "models/ct_demo.onnx", "--from", "WEB", "--study", STUDY, "--out", str(out),
                 "--export", "dicom-seg,sc,nifti", "--send", "ORTHANC", "--device", "cpu", "--no-progress"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "1 input: 1 ok, 0 failed" in captured.out
    assert "sent to ORTHANC: 33 of 33 files stored (SEG (1 file), OT (32 files)); a query found 2 of 2 series " \
           "complete" in captured.out
    seg_uid = next(line.split()[2].rstrip(":") for line in captured.out.splitlines()
                   if line.startswith("  SEG series "))

    # found by a query (series level) and read back from the server over WADO-RS
    assert main(["pacs", "find", "WEB", "--patient-id", PATIENT_ID, "--series", "--json"]) == 0
    series = {s["series_uid"]: s for s in json.loads(capsys.readouterr().out)[0]["series"]}
    assert series[seg_uid]["modality"] == "SEG" and [s["instances"] for s in series.values()].count(32) == 2
    back = tmp_path / "back"
    assert main(["pacs", "get", "WEB", STUDY, "--series", seg_uid, "--to", str(back)]) == 0
    [seg_file] = list((back / seg_uid).iterdir())
    seg = pydicom.dcmread(seg_file)
    assert seg.Modality == "SEG" and seg.StudyInstanceUID == STUDY

    # each frame references a stored source instance and equals the local label volume's slice for its segment
    volume = discover([CT])[0].volume
    order = {ref.sop_instance_uid: k for k, ref in enumerate(volume.slices)}
    stored = {pydicom.dcmread(p, stop_before_pixels=True).SOPInstanceUID for p in CT_FILES}
    [nifti] = list(out.rglob("*_mask.nii.gz"))
    labels = np.asarray(nib.load(nifti).dataobj).transpose(2, 1, 0)  # [col, row, k] → [k, row, col]
    frames = seg.pixel_array.reshape(-1, seg.Rows, seg.Columns)
    seen = set()
    for frame, group in zip(frames, seg.PerFrameFunctionalGroupsSequence, strict=True):
        source = group.DerivationImageSequence[0].SourceImageSequence[0].ReferencedSOPInstanceUID
        segment = int(group.SegmentIdentificationSequence[0].ReferencedSegmentNumber)
        assert source in stored
        assert np.array_equal(frame.astype(bool), labels[order[source]] == segment)
        seen.add((order[source], segment))
    present = {(k, int(c)) for k in range(labels.shape[0]) for c in np.unique(labels[k]) if c}
    assert present and seen == present  # no slice's class left out (only empty frames are)

    # the Secondary Capture series read back over C-GET: the local images, instance for instance
    sc_uid = next(line.split()[2].rstrip(":") for line in captured.out.splitlines() if line.startswith("  OT series "))
    assert main(["pacs", "get", "ORTHANC", STUDY, "--series", sc_uid, "--to", str(back)]) == 0
    local = {ds.SOPInstanceUID: ds for ds in map(pydicom.dcmread, next(out.rglob("*_sc")).iterdir())}
    remote = {ds.SOPInstanceUID: ds for ds in map(pydicom.dcmread, (back / sc_uid).iterdir())}
    assert len(local) == 32 and local.keys() == remote.keys()
    for uid, ds in local.items():
        assert np.array_equal(remote[uid].pixel_array, ds.pixel_array)
    server.clear()  # the study as the other tests expect it: the CT series alone
    server.upload(CT_FILES)


def test_pacs_send_stores_files_and_folders(nodes, server, tmp_path, capsys):
    from tests.dicom_factory import write_series

    files = write_series(tmp_path / "series", slices=3)
    (tmp_path / "series" / "notes.txt").write_text("not DICOM")  # in a folder: skipped
    assert main(["pacs", "send", "ORTHANC", str(tmp_path / "series")]) == 0
    assert capsys.readouterr().out == "3 of 3 files stored to ORTHANC\n"
    uid = str(pydicom.dcmread(files[0], stop_before_pixels=True).SeriesInstanceUID)
    back = [pydicom.dcmread(io.BytesIO(raw)) for raw in server.series_instances(uid)]
    stored = {ds.SOPInstanceUID: ds for ds in back}
    for ds in map(pydicom.dcmread, files):  # as sent (the server writes its own file meta: who sent it, when)
        assert np.array_equal(stored.pop(ds.SOPInstanceUID).pixel_array, ds.pixel_array)
    assert not stored
    server.clear()  # the CT sample alone again, as the other tests expect
    server.upload(CT_FILES)
    assert main(["pacs", "send", "WEB", str(tmp_path / "series" / "notes.txt")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [f"error: {tmp_path / 'series' / 'notes.txt'}: not a DICOM file (no DICM preamble)",
                   f"error: no DICOM files to send in: {tmp_path / 'series' / 'notes.txt'}"]


def test_a_wrong_password_is_one_line(nodes, monkeypatch, capsys):
    monkeypatch.setenv("SEGLENS_PACS_SECRET_WEB", "not-the-password")
    assert main(["pacs", "find", "WEB", "--patient-id", PATIENT_ID]) == 2
    captured = capsys.readouterr()
    line = one_error(captured.err)
    assert line.startswith("error: pacs WEB: ") and "401" in line
    assert "not-the-password" not in captured.err + captured.out


def test_a_wrong_called_ae_title_is_one_line(nodes, server, capsys):
    node = f"dimse://NOT_ORTHANC@127.0.0.1:{server.dicom_port}?calling=SEGLENS"
    assert main(["pacs", "echo", node]) == 2
    line = one_error(capsys.readouterr().err)
    assert line.startswith(f"error: pacs {node}: ") and "AE title" in line


def test_anonymize_send_to_a_node_not_marked_research_is_refused_before_anything_runs(nodes, tmp_path, capsys):
    out = tmp_path / "out"
    code = main(["run", "models/ct_demo.onnx", "--from", "WEB", "--study", STUDY, "--out", str(out),
                 "--export", "dicom-seg", "--anonymize", "--send", "ORTHANC", "--device", "cpu"])
    assert code == 2
    assert one_error(capsys.readouterr().err) == (
        "error: --anonymize with --send ORTHANC: a de-identified (pseudonymised) result is sent only to a research "
        "node (research: true in its settings): beside the identified study it would pass for another patient")
    assert not out.exists() and not nodes.exists()  # nothing retrieved, nothing written


@pytest.mark.parametrize(("dates", "found"), [("20251201-20260131", 1), ("20260101", 1), ("-20251231", 0),
                                              ("20260102-", 0)])
def test_find_by_study_date_range(nodes, dates, found, capsys):
    # the server is shared by the session's tests: other studies may be there, each inside the range or not found
    assert main(["pacs", "find", "ORTHANC", "--study-date", dates, "--json"]) == 0
    studies = json.loads(capsys.readouterr().out)
    assert [s["study_uid"] for s in studies].count(STUDY) == found
    low, _, high = dates.partition("-") if "-" in dates else (dates, "", dates)
    assert all((low or "0") <= s["study_date"] <= (high or "9") for s in studies), studies


@pytest.mark.parametrize("dates", ["2026-01-01", "20261301", "20260201-20260101", "-", "2026"])
def test_a_bad_study_date_is_a_usage_error(dates, capsys):
    with pytest.raises(SystemExit) as exited:
        main(["pacs", "find", "WEB", "--study-date", dates])
    assert exited.value.code == 2
    assert "argument --study-date: " in capsys.readouterr().err


def test_anonymize_send_to_a_research_node_names_no_source_uid_nor_patient(nodes, server, tmp_path, monkeypatch,
                                                                           capsys):
    from tests.dicom_factory import write_series

    monkeypatch.setenv("SEGLENS_PSEUDONYM_KEY", "b1" * 32)
    files = write_series(tmp_path / "in", slices=6, rows=64, columns=64)  # Doe^Jane, PID-0042
    header = pydicom.dcmread(files[0], stop_before_pixels=True)
    server.upload(files)
    try:
        code = main(["run", "models/ct_demo.onnx", "--from", "WEB", "--study", str(header.StudyInstanceUID),
                     "--out", str(tmp_path / "out"), "--export", "dicom-seg", "--anonymize", "--send", "RESEARCH",
                     "--device", "cpu", "--no-progress"])
        captured = capsys.readouterr()
        assert code == 0, captured.err
        assert "retrieved series 1 of 1 from WEB: 6 files" in captured.err
        assert "sent to RESEARCH: 1 of 1 file stored (SEG (1 file)); a query found 1 of 1 series complete" \
               in captured.out
        for private in (str(header.StudyInstanceUID), str(header.SeriesInstanceUID), "Doe", "PID-0042"):
            assert private not in captured.out + captured.err
    finally:
        server.clear()
        server.upload(CT_FILES)


def test_get_with_a_series_the_server_lacks_says_it_in_one_line_and_gets_the_rest(nodes, tmp_path, capsys):
    target = tmp_path / "got"
    assert main(["pacs", "get", "ORTHANC", STUDY, "--series", "1.2.3.4.5", "--series", SERIES,
                 "--to", str(target)]) == 1
    captured = capsys.readouterr()
    assert one_error(captured.err).startswith("error: pacs ORTHANC: ")
    assert captured.out.endswith("1 of 2 series retrieved from ORTHANC\n")
    assert [p.name for p in target.iterdir()] == [SERIES] and len(list((target / SERIES).iterdir())) == 32


@pytest.mark.parametrize("url", ["dimse://ORTHANC@127.0.0.1:{port}", "dicomweb+http://127.0.0.1:{port}/dicom-web"])
def test_a_node_nobody_listens_on_is_one_line(nodes, url, capsys):
    from tests.io.pacs.orthanc import free_port

    node = url.format(port=free_port())
    assert main(["pacs", "echo", node]) == 2
    assert one_error(capsys.readouterr().err).startswith(f"error: pacs {node}: ")


def test_get_into_a_folder_that_cannot_be_written_is_one_line_and_leaves_nothing(nodes, tmp_path, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("in the way")
    assert main(["pacs", "get", "WEB", STUDY, "--to", str(blocker)]) == 2
    assert one_error(capsys.readouterr().err) == (f"error: {blocker / SERIES}: cannot write the series "
                                                  "(Not a directory)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file", "cache", "settings.yaml"]
