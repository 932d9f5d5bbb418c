"""seglens-cli run --anonymize end to end (issue 24): a series whose files carry a patient's identity, stored under
patient-named folders as a PACS export lays them out, exported as SEG, Secondary Capture, NIfTI and the
de-identified source copy. Nothing of the source's identity may be found anywhere under --out: not in any byte of
any file (case-insensitive), not in any file or folder name; every DICOM says it is de-identified, dciodvfy finds no
error in the SEG and SC, and the SEG still references its (de-identified) source instance by instance."""

from __future__ import annotations

import csv
from pathlib import Path

import dciodvfy
import numpy as np
import pytest

from app.cli import main
from tests.dicom_factory import write_series

pytest.importorskip("highdicom")
pytest.importorskip("dicognito")

KEY = "0123456789abcdef0123456789abcdef"
IDENTITY = {
    "PatientName": "DOE^JANE", "PatientID": "PID-0042", "PatientBirthDate": "19631117",
    "AccessionNumber": "ACC88123X", "InstitutionName": "Saint Elsewhere Hospital",
    "InstitutionAddress": "12 Harbour Road, Springfield", "PatientAddress": "7 Elm Street, Shelbyville",
    "StationName": "CTSCAN07", "ReferringPhysicianName": "HOUSE^GREGORY", "OperatorsName": "RATCHED^MILDRED",
    "OtherPatientIDs": "MRN-557731", "PatientTelephoneNumbers": "555-0199-321", "DeviceSerialNumber": "SN-99417",
    "PatientComments": "prefers Dr Wilson", "StudyDescription": "CT CHEST Elsewhere",
}
# what must not be found: every value above, each part of the names, and the folders the series lies in
NEEDLES = {*IDENTITY.values(), "ELSEWHERE_CT7", "DOE", "JANE", "HOUSE", "GREGORY", "RATCHED", "MILDRED", "Wilson",
           "pacs_export", "PID-0042"}


def identified_series(root: Path) -> tuple[Path, list[Path]]:
    """A factory series with IDENTITY in every file and a private tag, under pacs_export/DOE^JANE_PID-0042/…"""
    import pydicom

    folder = root / "pacs_export" / "DOE^JANE_PID-0042" / "ACC88123X" / "CT_CHEST"
    paths = write_series(folder, slices=5, patient=("DOE^JANE", "PID-0042"))
    for path in paths:
        ds = pydicom.dcmread(path)
        for keyword, value in IDENTITY.items():
            setattr(ds, keyword, value)
        ds.file_meta.SourceApplicationEntityTitle = "ELSEWHERE_CT7"
        block = ds.private_block(0x0019, "ACME PACS", create=True)
        block.add_new(0x10, "LO", "DOE JANE 19631117")
        ds.save_as(path)
    return root / "pacs_export", paths


def run_anonymized(tmp_path: Path, monkeypatch, *extra: str) -> tuple[Path, list[Path]]:
    monkeypatch.setenv("SEGLENS_PSEUDONYM_KEY", KEY)
    source, paths = identified_series(tmp_path / "in")
    out = tmp_path / "OUT"
    code = main(["run", "ct_demo", str(source), "--out", str(out), "--export", "dicom-seg,sc,nifti,source",
                 "--anonymize", *extra])
    assert code == 0
    return out, paths


def test_nothing_of_the_source_identity_is_anywhere_under_out(tmp_path, monkeypatch):
    import pydicom

    out, paths = run_anonymized(tmp_path, monkeypatch, "--per-slice", "--save", "mask")
    sources = [pydicom.dcmread(p) for p in paths]
    uids = {str(ds.SOPInstanceUID) for ds in sources} | {str(sources[0].StudyInstanceUID),
                                                         str(sources[0].SeriesInstanceUID),
                                                         str(sources[0].FrameOfReferenceUID)}
    files = [p for p in out.rglob("*") if p.is_file()]
    assert len(files) >= 1 + 1 + 5 + 5 + 1 + 5  # report, SEG, SC, source copy, NIfTI, slice masks
    for path in out.rglob("*"):
        name = path.relative_to(out).as_posix().lower()
        assert not [n for n in NEEDLES if n.lower() in name], name
        if path.is_file():
            data = path.read_bytes().lower()
            found = [n for n in NEEDLES if n.lower().encode() in data]
            found += [u for u in uids if u.encode() in data]
            assert not found, f"{path.relative_to(out)}: {found}"
    dicoms = [p for p in files if p.suffix == ".dcm"]
    assert len(dicoms) == 11
    for path in dicoms:
        ds = pydicom.dcmread(path)
        assert ds.PatientIdentityRemoved == "YES"
        assert "113100" in [item.CodeValue for item in ds.DeidentificationMethodCodeSequence]
        assert str(ds.PatientName) == f"{ds.PatientID}^" and ds.PatientID.startswith("anon-")  # a PN: family only


def test_the_report_has_relative_pseudonymous_paths_and_the_seg_fits_the_source_copy(tmp_path, monkeypatch):
    import highdicom as hd
    import pydicom

    out, paths = run_anonymized(tmp_path, monkeypatch, "--per-slice")
    with open(out / "seglens_report.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["status"] for r in rows] == ["ok"] * 6
    patient = rows[0]["patient"]
    assert all(not r["path"].startswith("/") and r["path"].startswith(patient + "/") for r in rows)
    assert [r["path"] for r in rows[1:]] == [f"{rows[0]['path']}#{k}" for k in range(1, 6)]

    seg_path = next(out.rglob("*_seg.dcm"))
    copies = [pydicom.dcmread(p) for p in sorted(next(out.rglob("*_source")).glob("*.dcm"))]
    assert rows[0]["series"] == copies[0].SeriesInstanceUID == seg_path.name[: -len("_seg.dcm")]
    assert seg_path.parent.name == copies[0].StudyInstanceUID
    seg = hd.seg.segread(seg_path)
    referenced = seg.ReferencedSeriesSequence[0]
    assert referenced.SeriesInstanceUID == copies[0].SeriesInstanceUID
    assert {i.ReferencedSOPInstanceUID for i in referenced.ReferencedInstanceSequence} == \
        {c.SOPInstanceUID for c in copies}
    assert seg.StudyInstanceUID == copies[0].StudyInstanceUID
    assert seg.FrameOfReferenceUID == copies[0].FrameOfReferenceUID
    originals = [pydicom.dcmread(p) for p in paths]
    by_position = sorted(copies, key=lambda c: float(c.ImagePositionPatient[2]))
    planes = seg.get_pixels_by_source_instance(source_sop_instance_uids=[c.SOPInstanceUID for c in by_position],
                                               segment_numbers=[1], ignore_spatial_locations=True)
    assert planes.shape[0] == 5
    for copy, original in zip(by_position, sorted(originals, key=lambda o: float(o.ImagePositionPatient[2])),
                              strict=True):  # the copy is the source, pixel for pixel
        np.testing.assert_array_equal(copy.pixel_array, original.pixel_array)
    sc = pydicom.dcmread(next(out.rglob("sc_0001.dcm")))
    assert sc.SourceImageSequence[0].ReferencedSOPInstanceUID in {c.SOPInstanceUID for c in copies}


def test_the_anonymized_seg_and_sc_pass_dciodvfy(tmp_path, monkeypatch):
    dciodvfy.require()
    out, _ = run_anonymized(tmp_path, monkeypatch)
    assert dciodvfy.verify(next(out.rglob("*_seg.dcm"))).errors == ()
    for path in sorted(next(out.rglob("*_sc")).glob("*.dcm")):
        assert dciodvfy.verify(path).errors == ()


def test_the_same_key_gives_the_same_names_and_uids_and_another_key_others(tmp_path, monkeypatch):
    monkeypatch.setenv("SEGLENS_PSEUDONYM_KEY", KEY)
    source, _ = identified_series(tmp_path / "in")
    names = []
    for out, key in (("o1", KEY), ("o2", KEY), ("o3", KEY[::-1])):
        monkeypatch.setenv("SEGLENS_PSEUDONYM_KEY", key)
        assert main(["run", "ct_demo", str(source), "--out", str(tmp_path / out), "--export", "dicom-seg",
                     "--anonymize"]) == 0
        names.append(next((tmp_path / out).rglob("*_seg.dcm")).relative_to(tmp_path / out))
    assert names[0] == names[1] and names[2] != names[0]


def test_export_source_needs_anonymize_and_anonymize_refuses_ray(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SEGLENS_PSEUDONYM_KEY", KEY)
    source, _ = identified_series(tmp_path / "in")
    assert main(["run", "ct_demo", str(source), "--out", str(tmp_path / "o"), "--export", "source"]) == 2
    assert "--export source writes the source series de-identified: it needs --anonymize" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
    assert main(["run", "ct_demo", str(source), "--out", str(tmp_path / "o"), "--anonymize", "--ray"]) == 2
    assert "error: --anonymize with --ray is not supported yet" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_the_bundled_ct_model_on_its_own_sample_under_anonymize(tmp_path, capsys, monkeypatch):
    """The CT sample's fake patient was "Phantom^Demo" beside the model ct_demo: the de-identified SEG names its
    algorithm after the model, so --anonymize's last check found "Demo" and the bundled pipeline could not run
    anonymised at all. The patient shares no word with the model, the manufacturer or the descriptions now."""
    monkeypatch.setenv("SEGLENS_PSEUDONYM_KEY", "b1" * 32)
    repo, out = Path(__file__).resolve().parents[2], tmp_path / "out"
    assert main(["run", str(repo / "models" / "ct_demo.onnx"), str(repo / "resources" / "samples" / "ct"),
                 "--out", str(out), "--export", "dicom-seg,sc", "--anonymize", "--device", "cpu"]) == 0
    assert "1 input: 1 ok, 0 failed" in capsys.readouterr().out
    [seg] = out.rglob("*_seg.dcm")
    data = seg.read_bytes()
    assert b"Ostrander" not in data and b"Wilhelmina" not in data and b"OW-40712" not in data
