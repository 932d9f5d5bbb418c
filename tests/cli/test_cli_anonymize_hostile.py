"""seglens-cli run --anonymize against a hostile source (issue 24 §1): identifying values in the places a
de-identifier is easiest to miss — sequences (OtherPatientIDsSequence, RequestAttributesSequence,
ReferencedPatientSequence, a nested item's dates), the issuer, department, operator and performing physician,
telephone numbers, the station and device, UIDs of other instances in nested references (Referenced Image,
Source Image, Referenced Frame of Reference), a short numeric patient ID. Every byte under --out (the run's
outputs and the HTML review report; gzip and PNG text decompressed) and everything printed is searched for each
value."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cli import main
from tests.dicom_factory import write_series

pytest.importorskip("highdicom")
pytest.importorskip("dicognito")

KEY = "fedcba9876543210fedcba9876543210"
PATIENT_ID = "48151"  # five digits: shorter than the last check's plain-number limit
TOP = {
    "IssuerOfPatientID": "NORTHSIDE-MRN", "InstitutionalDepartmentName": "Radiology East Wing",
    "OperatorsName": "RATCHED^MILDRED", "PerformingPhysicianName": "CUDDY^LISA",
    "PatientTelephoneNumbers": "555-0199-321", "PatientAddress": "7 Elm Street, Shelbyville",
    "DeviceSerialNumber": "SN-99417", "StationName": "CTSCAN07", "InstitutionName": "Saint Elsewhere",
    "PatientComments": "sister of Mary Poppins", "AccessionNumber": "ACC88123X", "PatientBirthDate": "19631117",
    "OtherPatientIDs": "MRN-557731", "ReferringPhysicianName": "HOUSE^GREGORY",
    # PS3.15 Table E.1-1 attributes that dicognito keeps and the Patient / Study modules carry into a SEG or SC
    "ClinicalTrialSubjectID": "SUBJ-7781", "ClinicalTrialSubjectReadingID": "READ-7782",
    "ClinicalTrialSponsorName": "Acme Pharma", "ClinicalTrialProtocolID": "PROTO-7783",
    "ClinicalTrialProtocolName": "Trial Nine", "ClinicalTrialSiteID": "SITE-7784",
    "ClinicalTrialSiteName": "Elsewhere Site", "ClinicalTrialTimePointID": "TP-7785",
    "ClinicalTrialTimePointDescription": "Baseline at Elsewhere", "ClinicalTrialCoordinatingCenterName": "Acme Hub",
    "ClinicalTrialSeriesID": "CTS-7786", "ClinicalTrialSeriesDescription": "Series at Elsewhere",
    "ClinicalTrialProtocolEthicsCommitteeName": "Elsewhere Ethics",
    "ClinicalTrialProtocolEthicsCommitteeApprovalNumber": "ETH-7787",
    "PerformedStationName": "PERFSTN-01", "PerformedStationAETitle": "PERF_AE_01", "DetectorID": "DET-7788",
    "PatientTransportArrangements": "wheelchair from ward 9",
}
NESTED = {"ELSEWHERE-RIS", "MRN-OTHER-2291", "NORTHSIDE-ISSUER", "RP-778899", "SPS-445566", "Jane chest pain",
          "ACC-NESTED-77"}
NEEDLES = {*TOP.values(), *NESTED, "DOE", "JANE", "RATCHED", "MILDRED", "CUDDY", "LISA", "HOUSE", "GREGORY",
           "Poppins", "19631117", "hostile_pacs"}
OTHER_UIDS = tuple(f"1.2.826.0.1.3680043.8.498.{n}" for n in (111111, 222222, 333333, 444444, 555555))


def hostile_series(root: Path) -> tuple[Path, set[str]]:
    """A factory series with the values above at the top level and in nested items; returns its folder and
    every instance UID it holds (its own and the ones it references)."""
    import pydicom
    from pydicom.dataset import Dataset

    folder = root / "hostile_pacs" / f"DOE^JANE_{PATIENT_ID}"
    paths = write_series(folder, slices=4, patient=("DOE^JANE", PATIENT_ID))
    uids: set[str] = set(OTHER_UIDS)
    for path in paths:
        ds = pydicom.dcmread(path)
        for keyword, value in TOP.items():
            setattr(ds, keyword, value)
        other = Dataset()
        other.PatientID, other.IssuerOfPatientID, other.TypeOfPatientID = "MRN-OTHER-2291", "NORTHSIDE-ISSUER", "TEXT"
        ds.OtherPatientIDsSequence = [other]
        request = Dataset()
        request.RequestedProcedureID, request.ScheduledProcedureStepID = "RP-778899", "SPS-445566"
        request.RequestedProcedureDescription, request.AccessionNumber = "Jane chest pain", "ACC-NESTED-77"
        request.ScheduledProcedureStepStartDate = "19631117"  # a date in a nested item: the birth date
        ds.RequestAttributesSequence = [request]
        patient = Dataset()
        patient.ReferencedSOPClassUID, patient.ReferencedSOPInstanceUID = "1.2.840.10008.3.1.2.1.4", OTHER_UIDS[0]
        ds.ReferencedPatientSequence = [patient]
        image = Dataset()
        image.ReferencedSOPClassUID, image.ReferencedSOPInstanceUID = ds.SOPClassUID, OTHER_UIDS[1]
        image.ContentDate, image.ContentTime = "19631117", "101500"  # a date in an item the profile keeps
        ds.ReferencedImageSequence = [image]
        source = Dataset()
        source.ReferencedSOPClassUID, source.ReferencedSOPInstanceUID = ds.SOPClassUID, OTHER_UIDS[2]
        ds.SourceImageSequence = [source]
        frame = Dataset()
        frame.FrameOfReferenceUID = OTHER_UIDS[3]
        ds.ReferencedFrameOfReferenceSequence = [frame]
        issuer = Dataset()
        issuer.LocalNamespaceEntityID = "ELSEWHERE-RIS"
        ds.IssuerOfAccessionNumberSequence = [issuer]
        study = Dataset()
        study.ReferencedSOPClassUID, study.ReferencedSOPInstanceUID = "1.2.840.10008.3.1.2.3.1", OTHER_UIDS[4]
        ds.ReferencedStudySequence = [study]
        ds.save_as(path)
        uids |= {str(ds.SOPInstanceUID), str(ds.StudyInstanceUID), str(ds.SeriesInstanceUID),
                 str(ds.FrameOfReferenceUID), str(ds.file_meta.MediaStorageSOPInstanceUID)}
    return root / "hostile_pacs", uids


def test_no_value_of_a_hostile_source_survives_anywhere(tmp_path, monkeypatch, capsys):
    import pydicom

    monkeypatch.setenv("SEGLENS_PSEUDONYM_KEY", KEY)
    source, uids = hostile_series(tmp_path / "in")
    out = tmp_path / "OUT"
    code = main(["run", "ct_demo", str(source), "--out", str(out), "--export", "dicom-seg,sc,nifti,source",
                 "--anonymize", "--per-slice", "--save", "mask,overlay"])
    review = source.with_name(f"{source.name}_review")
    review.mkdir()
    code |= main(["report", str(review), "--model", "ct_demo", "--anonymize", "--out", str(out / "review.html")])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert (out / "review.html").stat().st_size > 0
    files = [p for p in out.rglob("*") if p.is_file()]
    assert sum(p.suffix == ".dcm" for p in files) == 1 + 4 + 4  # SEG, SC, source copy
    terminal = (printed.out + printed.err).lower()
    assert not [n for n in NEEDLES | {PATIENT_ID} if n.lower() in terminal], terminal
    for path in out.rglob("*"):
        name = path.relative_to(out).as_posix().lower()
        assert not [n for n in NEEDLES | {PATIENT_ID} if n.lower() in name], name
        if path.is_file():
            data = _contents(path).lower()
            found = [n for n in NEEDLES if n.lower().encode() in data]
            found += [u for u in uids if u.encode() in data]
            assert not found, f"{path.relative_to(out)}: {found}"
    for path in (p for p in files if p.suffix == ".dcm"):
        ds = pydicom.dcmread(path)
        texts = [str(e.value) for e in _walk(ds) if e.VR not in ("OB", "OW", "SQ", "UN")]
        assert PATIENT_ID not in texts, path.name  # the short ID as a whole value, anywhere
        assert ds.file_meta.MediaStorageSOPInstanceUID == ds.SOPInstanceUID
        assert ds.PatientIdentityRemoved == "YES"


def _contents(path: Path) -> bytes:
    """A file's bytes, a gzip file's decompressed, a PNG's with its (compressed) text chunks as text."""
    import gzip

    data = path.read_bytes()
    if path.name.endswith(".gz"):
        return gzip.decompress(data)
    if path.suffix == ".png":
        from PIL import Image

        with Image.open(path) as image:
            return data + repr(image.info).encode()
    return data


def _walk(dataset):
    yield from dataset.iterall()
    yield from dataset.file_meta
