"""issue 36's "Done when": an --anonymize run over series whose patients, referrers and operators carry short common
names (Ana, Pat, Tom, Otto, Li, Lung, Bone) writes SEG, RTSTRUCT, SC, NIfTI, the de-identified source and the
reports with no identifier and no refusal. Before, the last check found "Ana" in "Anatomical Structure", "Tom" in
"Anatomical", "Pat" in "Patient", "Otto" in the review report's CSS "bottom", and refused the volume or the report.

Each output is searched for the names the way a reader would find them: as whole words (a DICOM text attribute,
a NIfTI header's text, a report's cell or a page's text, a file or folder name) and as the whole value."""

from __future__ import annotations

import csv
import re
from html.parser import HTMLParser
from pathlib import Path

import dciodvfy
import pydicom
import pytest

from app.cli import main
from tests.dicom_factory import write_series

pytest.importorskip("highdicom")
pytest.importorskip("dicognito")

KEY = "fedcba9876543210fedcba9876543210"
# three patients; their referring physicians, operators and other staff carry the same short names
SERIES = {
    "Ana^Pat_PID-1001": {"PatientName": "Ana^Pat", "PatientID": "PID-1001", "ReferringPhysicianName": "Tom^Otto",
                         "OperatorsName": "Li^Lung", "PerformingPhysicianName": "Bone^Ana"},
    "Otto^Tom_Bone": {"PatientName": "Otto^Tom", "PatientID": "Bone", "ReferringPhysicianName": "Pat^Li",
                      "OperatorsName": "Lung^Bone", "NameOfPhysiciansReadingStudy": "Ana^Tom"},
    "Li^Lung_PID-1003": {"PatientName": "Li^Lung", "PatientID": "PID-1003", "ReferringPhysicianName": "Ana^Bone",
                         "OperatorsName": "Otto^Pat", "OtherPatientNames": "Tom^Li"},
}
WORDS = {"ana", "pat", "tom", "otto", "li", "lung", "bone"}
VALUES = {value.lower() for attributes in SERIES.values() for value in attributes.values()}
EXPORTS = ("_seg.dcm", "_rtstruct.dcm", "_sc", "_mask.nii.gz", "_source")


def inputs(root: Path) -> Path:
    """The three series under folders named for their patients (as a PACS export lays them out)."""
    for folder, attributes in SERIES.items():
        paths = write_series(root / "studies" / folder, slices=3, patient=(attributes["PatientName"],
                                                                          attributes["PatientID"]))
        for path in paths:
            ds = pydicom.dcmread(path)
            for keyword, value in attributes.items():
                setattr(ds, keyword, value)
            ds.Laterality, ds.PatientPosition, ds.KVP, ds.AcquisitionNumber = "", "HFS", "120", 1  # conformant
            ds.save_as(path)
    return root / "studies"


def words(text: str) -> set[str]:
    return set(re.findall(r"[^\W_]+", text.lower()))


def names_in(text: str) -> set[str]:
    """The names found in `text`: a name as a whole word, or a whole value (`ana^pat`) anywhere."""
    lower = text.lower()
    return (words(text) & WORDS) | {value for value in VALUES if value in lower}


class PageText(HTMLParser):
    """A page's text and attribute values (not its CSS, not its embedded pictures)."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self.style = False

    def handle_starttag(self, tag, attrs):
        self.style = tag == "style"
        self.parts += [value for name, value in attrs if value and not value.startswith("data:")]

    def handle_endtag(self, tag):
        self.style = False

    def handle_data(self, data):
        if not self.style:
            self.parts.append(data)


def dicom_text(path: Path) -> str:
    """Every value of a DICOM file, nested sequences and file meta too, but its pixels."""
    ds = pydicom.dcmread(path)
    texts: list[str] = []

    def walk(dataset) -> None:
        for element in dataset:
            if element.VR == "SQ":
                for item in element.value:
                    walk(item)
            elif element.tag not in (0x7FE00010,):
                value = element.value
                texts.append(value.decode("latin-1") if isinstance(value, bytes) else str(value))

    walk(ds.file_meta)
    walk(ds)
    return "\n".join(texts)


def file_text(path: Path) -> str:
    name = path.name.lower()
    if name.endswith(".dcm"):
        return dicom_text(path)
    if name.endswith(".nii.gz"):
        import nibabel as nib

        header = nib.load(path).header
        fields = [bytes(header[f]).decode("latin-1") for f in ("descrip", "aux_file", "intent_name", "db_name")]
        return "\n".join([*fields, *(bytes(e.get_content()).decode("latin-1") for e in header.extensions)])
    if name.endswith(".html"):
        page = PageText()
        page.feed(path.read_text(encoding="utf-8"))
        return "\n".join(page.parts)
    return path.read_bytes().decode("utf-8", "replace")


def test_an_anonymized_run_over_staff_and_subjects_named_with_common_words_refuses_nothing_and_names_no_one(
        tmp_path, ct_model, monkeypatch, capsys):
    monkeypatch.setenv("SEGLENS_PSEUDONYM_KEY", KEY)
    monkeypatch.setenv("SEGLENS_LOG_DIR", str(tmp_path / "logs"))
    source = inputs(tmp_path)
    out = tmp_path / "OUT"
    code = main(["run", str(ct_model), str(source), "--out", str(out), "--export",
                 "dicom-seg,rtstruct,sc,nifti,source", "--anonymize", "--no-progress"])
    said = capsys.readouterr()
    assert code == 0, said.err
    assert "de-identification check failed" not in said.out + said.err
    with open(out / "seglens_report.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [row["status"] for row in rows] == ["ok"] * 3 and all(not row["error"] for row in rows)
    for row in rows:  # every export of every volume written
        for suffix in EXPORTS:
            assert (out / (row["path"] + suffix)).exists(), row["path"] + suffix

    (tmp_path / "studies_review").mkdir()
    report = out / "review.html"
    assert main(["report", str(tmp_path / "studies_review"), "--model", str(ct_model), "--anonymize",
                 "--out", str(report)]) == 0, capsys.readouterr().err
    assert report.is_file()
    said_too = capsys.readouterr()

    files = [path for path in out.rglob("*") if path.is_file()]
    dicoms = [path for path in files if path.suffix == ".dcm"]
    assert len(dicoms) == 3 * (1 + 1 + 3 + 3)  # SEG, RTSTRUCT, 3 SC images, 3 source copies
    for path in out.rglob("*"):
        rel = path.relative_to(out).as_posix()
        assert not names_in(rel), rel
        if path.is_file():
            assert not names_in(file_text(path)), (rel, names_in(file_text(path)))
    for path in dicoms:
        assert dciodvfy.verify(path).errors == (), path.relative_to(out)
        assert pydicom.dcmread(path).PatientIdentityRemoved == "YES"
    logs = [path for path in (tmp_path / "logs").rglob("*") if path.is_file()]
    for text in (said.out, said.err, said_too.out, said_too.err, *(p.read_text("utf-8", "replace") for p in logs)):
        assert not names_in(text.replace(str(tmp_path), "")), text


# patients named like the model's vocabulary: the model `lung` (its class "lung"), SegLens's codes ("Tissue", the
# PS3.15 profile's "Basic Application Confidentiality Profile") and nothing else of theirs anywhere
NAMED_LIKE_THE_MODEL = {
    "Lung_PID-2001": {"PatientName": "Lung", "PatientID": "PID-2001"},
    "Basic^Tissue_PID-2002": {"PatientName": "Basic^Tissue", "PatientID": "PID-2002"},
    # the same patient Lung, but a source description naming her is copied into the de-identified source copy
    "Lung_PID-2003": {"PatientName": "Lung", "PatientID": "PID-2003", "ContentDescription": "Lung Lung biopsy"},
}


def test_a_patient_named_like_a_class_of_the_model_is_exported_and_a_source_text_naming_her_still_refused(
        tmp_path, models, monkeypatch, capsys):
    """The class "lung", the model `lung` and SegLens's code meanings are the model's and SegLens's words, the same
    for every patient: a SEG segment, an RTSTRUCT ROI, a series description holding them is no leak of a patient
    called Lung (issue 36: every such volume was refused). A text copied from the source that holds her name is
    still one, even in a field SegLens also writes (ContentDescription)."""
    monkeypatch.setenv("SEGLENS_PSEUDONYM_KEY", KEY)
    model = models("binary_logits", "lung")
    model.with_suffix(".yaml").write_text("input:\n  window: [40, 400]\nclasses:\n  - background\n  - lung\n")
    for folder, attributes in NAMED_LIKE_THE_MODEL.items():
        for path in write_series(tmp_path / "studies" / folder, slices=3,
                                 patient=(attributes["PatientName"], attributes["PatientID"])):
            ds = pydicom.dcmread(path)
            for keyword, value in attributes.items():
                setattr(ds, keyword, value)
            ds.save_as(path)
    out = tmp_path / "OUT"
    code = main(["run", str(model), str(tmp_path / "studies"), "--out", str(out), "--export",
                 "dicom-seg,rtstruct,sc,nifti,source", "--anonymize", "--no-progress"])
    said = capsys.readouterr()
    assert code == 1, said.err  # the one leaking volume
    with open(out / "seglens_report.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    ok = [row for row in rows if row["status"] == "ok"]
    refused = [row for row in rows if row["status"] == "error"]
    assert len(ok) == 2 and len(refused) == 1, [row["error"] for row in rows]
    for row in ok:
        for suffix in EXPORTS:
            assert (out / (row["path"] + suffix)).exists(), row["path"] + suffix
        seg = pydicom.dcmread(out / (row["path"] + "_seg.dcm"))
        assert [item.SegmentLabel for item in seg.SegmentSequence] == ["lung"]
        assert seg.SeriesDescription == "SegLens lung" and seg.ContentDescription == "Segmentation by lung"
        rtstruct = pydicom.dcmread(out / (row["path"] + "_rtstruct.dcm"))
        assert [item.ROIName for item in rtstruct.StructureSetROISequence] == ["lung"]
        source = next((out / (row["path"] + "_source")).glob("*.dcm"))
        assert "Basic Application Confidentiality Profile" in \
            [item.CodeMeaning for item in pydicom.dcmread(source).DeidentificationMethodCodeSequence]
    error = refused[0]["error"]
    assert error.startswith(f"{refused[0]['path']}: de-identification check failed: a patient name in the DICOM "
                            f"tags of {refused[0]['path']}_source/"), error
    assert error.endswith("; the volume's outputs were removed") and "lung" not in error.lower()
    assert not list(out.glob(refused[0]["path"] + "*"))

    # the review report names the model (lung.onnx, its title) and each volume's "mL lung": written for them too
    (tmp_path / "studies_review").mkdir()
    report = out / "review.html"
    assert main(["report", str(tmp_path / "studies_review"), "--model", str(model), "--anonymize",
                 "--out", str(report)]) == 0, capsys.readouterr().err
    page = report.read_text(encoding="utf-8")
    assert "mL lung" in page and "SegLens review — lung.onnx" in page
