"""The DICOM SEG and Secondary Capture SegLens writes, checked by an outside validator (dciodvfy) and against the
source: its patient and study modules, its laterality, and a banner that covers none of the image."""

from __future__ import annotations

from pathlib import Path

import dciodvfy
import dicom_factory
import numpy as np
import pytest
from test_volume_exports import ALGORITHM, SEGMENTS, dicom_volume, known_labels, windowed

from app.io.render import blend_overlay
from app.io.volumes import Volume
from app.runs.exports import secondary_capture
from app.runs.exports.formats import write_dicom_seg, write_secondary_capture

# What a real CT's Patient and Study modules hold beyond what highdicom's SC constructor asks for.
STUDY_AND_PATIENT = {
    "StudyDescription": "CT THORAX", "PatientAge": "056Y", "PatientWeight": "71.5", "PatientSize": "1.68",
    "StudyID": "S-77", "ReferringPhysicianName": "House^Gregory", "AdditionalPatientHistory": "smoker",
    "IssuerOfPatientID": "HOSPITAL-A", "PatientComments": "none",
}


def edited_volume(folder: Path, **attributes) -> Volume:
    """A factory series whose every file also carries `attributes` (None deletes one)."""
    import pydicom

    volume = dicom_volume(folder)
    for ref in volume.slices:
        ds = pydicom.dcmread(ref.path)
        for keyword, value in attributes.items():
            if value is None:
                delattr(ds, keyword)
            else:
                setattr(ds, keyword, value)
        ds.save_as(ref.path)
    return volume


def sc_files(volume: Volume, out: Path) -> list[Path]:
    return write_secondary_capture(volume, known_labels(), SEGMENTS, out, display=windowed, opacity=0.5,
                                   algorithm=ALGORITHM)


# --- an outside validator --------------------------------------------------------------------------------------

@pytest.mark.parametrize("body", [
    {},  # no body part, no laterality: Laterality empty (unknown)
    {"BodyPartExamined": "CHEST"},  # unpaired: no Laterality at all
    {"BodyPartExamined": "KNEE", "Laterality": "R"},  # paired, known: carried
    {"BodyPartExamined": "BREAST", "ImageLaterality": "L"},  # given per image instead
], ids=["unknown", "chest", "right-knee", "image-laterality"])
def test_sc_and_seg_pass_dciodvfy_with_no_error(tmp_path: Path, body: dict):
    dciodvfy.require()
    volume = edited_volume(tmp_path / "series", **STUDY_AND_PATIENT, **body)
    seg = write_dicom_seg(volume, known_labels(), SEGMENTS, tmp_path / "seg.dcm", algorithm=ALGORITHM)
    assert dciodvfy.verify(seg).errors == ()
    for path in sc_files(volume, tmp_path / "sc"):
        findings = dciodvfy.verify(path)
        assert findings.errors == ()  # was "Missing attribute Type 2C Conditional Element=<Laterality>" in each
        if body:  # the laterality question is answered: not even a warning about it
            assert not [w for w in findings.warnings if "Laterality" in w]


def test_sc_laterality_follows_the_source(tmp_path: Path):
    import pydicom

    cases = {"unknown": ({}, ""), "chest": ({"BodyPartExamined": "CHEST"}, None),
             "knee": ({"BodyPartExamined": "KNEE", "Laterality": "R"}, "R"),
             "empty-on-chest": ({"BodyPartExamined": "CHEST", "Laterality": ""}, None)}
    for name, (attributes, expected) in cases.items():
        volume = edited_volume(tmp_path / name, **attributes)
        ds = pydicom.dcmread(sc_files(volume, tmp_path / f"sc-{name}")[0])
        assert ds.get("Laterality") == expected, name
        assert ds.get("BodyPartExamined") == attributes.get("BodyPartExamined"), name
    volume = edited_volume(tmp_path / "mg", BodyPartExamined="BREAST", ImageLaterality="L")
    ds = pydicom.dcmread(sc_files(volume, tmp_path / "sc-mg")[0])
    assert ds.ImageLaterality == "L" and "Laterality" not in ds


# --- the source's patient and study -------------------------------------------------------------------------------

def test_sc_carries_the_sources_patient_and_study_modules_as_the_seg_does(tmp_path: Path):
    import pydicom

    volume = edited_volume(tmp_path / "series", **STUDY_AND_PATIENT)
    seg = pydicom.dcmread(write_dicom_seg(volume, known_labels(), SEGMENTS, tmp_path / "seg.dcm",
                                          algorithm=ALGORITHM))
    for path in sc_files(volume, tmp_path / "sc"):
        sc = pydicom.dcmread(path)
        for keyword, value in STUDY_AND_PATIENT.items():
            assert str(sc.get(keyword)) == value, keyword
            assert str(sc.get(keyword)) == str(seg.get(keyword)), keyword
        for keyword in ("PatientName", "PatientID", "PatientBirthDate", "PatientSex", "StudyInstanceUID",
                        "AccessionNumber", "StudyDate", "StudyTime"):
            assert sc.get(keyword) == seg.get(keyword), keyword


def test_sc_of_a_deidentified_source_still_says_so(tmp_path: Path):
    import pydicom
    from pydicom.dataset import Dataset

    method = Dataset()
    method.CodeValue, method.CodingSchemeDesignator, method.CodeMeaning = "113100", "DCM", "Basic Application " \
                                                                                          "Confidentiality Profile"
    volume = edited_volume(tmp_path / "series", PatientIdentityRemoved="YES",
                           DeidentificationMethod="PS3.15 Basic Profile", DeidentificationMethodCodeSequence=[method])
    sc = pydicom.dcmread(sc_files(volume, tmp_path / "sc")[0])
    assert sc.PatientIdentityRemoved == "YES"
    assert sc.DeidentificationMethod == "PS3.15 Basic Profile"
    assert sc.DeidentificationMethodCodeSequence[0].CodeValue == "113100"


# --- the banner ---------------------------------------------------------------------------------------------------

def test_sc_banner_is_a_margin_above_the_whole_image(tmp_path: Path):
    import pydicom

    volume = dicom_volume(tmp_path / "series")
    labels = known_labels()
    strip = secondary_capture.banner_height(32, secondary_capture.banner_text(ALGORITHM))
    assert strip >= 12
    paints = [secondary_capture._Paint(None)] * 256
    for segment in SEGMENTS:
        paints[segment.value] = secondary_capture._Paint(segment.color)
    for k, path in enumerate(sc_files(volume, tmp_path / "sc")):
        ds = pydicom.dcmread(path)
        rgb = ds.pixel_array
        assert rgb.shape == (32 + strip, 32, 3) and (ds.Rows, ds.Columns) == (32 + strip, 32)
        # every row of the picture, the top ones too, exactly as the overlay made it, below the margin
        expected = blend_overlay(windowed(k), labels[k], paints, alpha=0.5)
        np.testing.assert_array_equal(rgb[strip:], expected)
        gray = windowed(k)
        outside = labels[k] == 0
        np.testing.assert_array_equal(rgb[strip:][outside], np.stack([gray[outside]] * 3, axis=-1))
        margin = rgb[:strip]
        assert (margin == 24).mean() > 0.5 and (margin > 200).any()  # a dark strip with white text on it
        assert ds.SourceImageSequence[0].SpatialLocationsPreserved == "NO"


def test_burn_banner_leaves_the_image_rows_untouched_at_every_width():
    text = "NOT FOR DIAGNOSIS - SegLens a-rather-long-model-name"
    rng = np.random.default_rng(1)
    for rows, columns in ((8, 8), (32, 32), (64, 512), (512, 512), (300, 2000)):
        rgb = rng.integers(0, 256, (rows, columns, 3), dtype=np.uint8)
        out = secondary_capture.burn_banner(rgb, text)
        strip = out.shape[0] - rows
        assert strip == secondary_capture.banner_height(columns, text) and strip >= 12
        np.testing.assert_array_equal(out[strip:], rgb)
        assert (out[:strip] > 200).any()


# --- a source de-identified by another tool ------------------------------------------------------------------------

def _code(value: str, scheme: str, meaning: str | None) -> object:
    from pydicom.dataset import Dataset

    item = Dataset()
    item.CodeValue, item.CodingSchemeDesignator = value, scheme
    if meaning is not None:
        item.CodeMeaning = meaning
    return item


# what other tools write: a method's name only, nothing but YES, an empty code sequence, a code with no meaning
ELSEWHERE = {
    "method-only": {"DeidentificationMethod": "CTP DICOM-S142"},
    "yes-only": {},
    "empty-sequence": {"DeidentificationMethod": "in-house", "DeidentificationMethodCodeSequence": []},
    "code-without-meaning": {"DeidentificationMethodCodeSequence": [_code("113100", "DCM", None)]},
}


@pytest.mark.parametrize("anonymize", [False, True], ids=["plain", "anonymize"])
@pytest.mark.parametrize("said", list(ELSEWHERE), ids=list(ELSEWHERE))
def test_the_exports_of_a_source_de_identified_elsewhere_pass_dciodvfy(tmp_path: Path, ct_model, monkeypatch,
                                                                       said: str, anonymize: bool):
    """A source another tool de-identified (PatientIdentityRemoved YES, however it said how) gives SEG, SC,
    RTSTRUCT and the de-identified source copy with no dciodvfy error, with and without --anonymize; every file
    says it is de-identified and how (was: an empty DeidentificationMethodCodeSequence or DeidentificationMethod,
    or an item without CodeMeaning, in each)."""
    import pydicom

    from app.cli import main

    dciodvfy.require()
    monkeypatch.setenv("SEGLENS_PSEUDONYM_KEY", "0123456789abcdef0123")
    paths = dicom_factory.write_series(tmp_path / "in", slices=3, patient=("anon-1^", "anon-1"))
    for path in paths:
        ds = pydicom.dcmread(path)
        ds.PatientIdentityRemoved, ds.Laterality, ds.PatientPosition, ds.KVP, ds.AcquisitionNumber = \
            "YES", "", "HFS", "120", 1  # a source with no dciodvfy error of its own
        for keyword, value in ELSEWHERE[said].items():
            setattr(ds, keyword, value)
        ds.save_as(path)
    if said == "method-only":  # the source itself passes: every error below is the exports' own
        assert dciodvfy.verify(paths[0]).errors == ()
    out = tmp_path / "out"
    exports = "dicom-seg,sc,rtstruct" + (",source" if anonymize else "")
    assert main(["run", str(ct_model), str(tmp_path / "in"), "--out", str(out), "--export", exports,
                 "--no-progress", *(["--anonymize"] if anonymize else [])]) == 0
    written = sorted(out.rglob("*.dcm"))
    assert len(written) == (1 + 3 + 1 + (3 if anonymize else 0))
    for path in written:
        assert dciodvfy.verify(path).errors == (), path.name
        ds = pydicom.dcmread(path)
        assert ds.PatientIdentityRemoved == "YES"
        assert ds.get("DeidentificationMethod") or ds.get("DeidentificationMethodCodeSequence")
