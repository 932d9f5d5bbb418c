"""The last check of --anonymize (app.runs.privacy.check) on values a hostile source holds: a clinical trial
subject ID (it identifies the patient to the trial), and a patient ID too short to look for as a substring
(five digits), found as a whole word in a DICOM text attribute though not inside a number or a UID."""

from __future__ import annotations

import pydicom
import pytest
from pydicom.dataset import Dataset

from app.runs.privacy.check import Identifying, leak
from app.runs.privacy.deidentify import source_facts
from tests.dicom_factory import write_series

pytest.importorskip("dicognito")


def _source(tmp_path):
    path = write_series(tmp_path / "src", slices=1, patient=("DOE^JANE", "48151"))[0]
    ds = pydicom.dcmread(path)
    ds.ClinicalTrialSubjectID = "SUBJ-7781"
    return ds


def _written(tmp_path, name, **attributes):
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    ds = pydicom.dcmread(write_series(tmp_path / name, slices=1, patient=("anon-0123456789ab", "x"))[0])
    ds.PatientBirthDate = ""
    for keyword, value in attributes.items():
        setattr(ds, keyword, value)
    path = out / f"{name}.dcm"
    ds.save_as(path)
    return path, out


def test_a_clinical_trial_subject_id_is_looked_for(tmp_path):
    identifying = Identifying.of(source_facts([_source(tmp_path)]).values)
    path, out = _written(tmp_path, "a", ClinicalTrialSubjectID="SUBJ-7781")
    assert leak([path], identifying, root=out) == "a patient ID in the DICOM tags of a.dcm"


def test_a_short_numeric_patient_id_is_found_as_a_word_in_text_not_inside_numbers(tmp_path):
    identifying = Identifying.of(source_facts([_source(tmp_path)]).values)
    code = Dataset()
    code.CodeValue, code.CodingSchemeDesignator, code.CodeMeaning = "T-1", "99X", "CT for 48151, left"
    path, out = _written(tmp_path, "b", ProcedureCodeSequence=[code])
    assert leak([path], identifying, root=out) == "a patient ID in the DICOM tags of b.dcm"
    # inside a longer number, a decimal, a UID, a hex digest or a numeric attribute it is chance, not the ID
    path, out = _written(tmp_path, "c", ImageComments="model sha256 0481510ab 1.48151 48151.5 2.25.481519",
                         WindowWidth=48151, SeriesNumber=48151)
    assert leak([path], identifying, root=out) is None
    assert leak([out / "c.dcm"], identifying, root=out, cells=["48151", "0.48151"]) is None  # cells: numbers
