"""--anonymize (issue 24): highdicom is never handed the identified source. It copies the patient and study
modules from the source headers it is given and quotes them in warnings ('The string "SMITHSON" is unlikely to
represent the intended person name…') and INFO lines (the source SOP UIDs): under --anonymize it is given copies
whose identifying values are already the pseudonym or empty. The pseudonym is written as PatientName in a valid
PN form (family name only, `anon-…^`: dciodvfy warned "Retired Person Name form" for `anon-…`), PatientID and
the report keep `anon-…`."""

from __future__ import annotations

import logging
import warnings
from dataclasses import replace

import dciodvfy
import pydicom
import pytest
from test_volume_exports import ALGORITHM, SEGMENTS, dicom_volume, known_labels, windowed

from app.runs.exports.formats import write_dicom_seg, write_secondary_capture
from app.runs.privacy.deidentify import volume_privacy

pytest.importorskip("dicognito")
KEY = b"k" * 32
IDENTITY = {"PatientName": "SMITHSON", "PatientID": "PID-77", "PatientBirthDate": "19550101",
            "AccessionNumber": "ACC-55123", "InstitutionName": "Hospital of St Elsewhere",
            "ReferringPhysicianName": "HOUSE^GREGORY"}


def smithson_volume(tmp_path):
    volume = dicom_volume(tmp_path / "series", patient=("SMITHSON", "PID-77"))
    for ref in volume.slices:
        ds = pydicom.dcmread(ref.path)
        for keyword, value in IDENTITY.items():
            setattr(ds, keyword, value)
        ds.save_as(ref.path)
    return replace(volume, info={"Patient": "SMITHSON", "Patient ID": "PID-77"})


def _said(records, caught) -> str:
    return "\n".join([r.getMessage() for r in records] + [str(w.message) for w in caught])


@pytest.mark.parametrize("export", ["seg", "sc"])
def test_highdicom_sees_no_identifying_value_and_the_name_is_a_valid_pn(tmp_path, export, caplog, monkeypatch):
    volume = smithson_volume(tmp_path)
    privacy = volume_privacy(volume, anonymize=True, key=KEY)
    pseudonym = privacy.deidentifier.pseudonym
    caplog.set_level(logging.DEBUG)
    for name in ("highdicom", "pydicom"):
        caplog.set_level(logging.DEBUG, logger=name)
        monkeypatch.setattr(logging.getLogger(name), "propagate", True)  # app.logs.quiet_libraries: not to caplog
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if export == "seg":
            written = [write_dicom_seg(volume, known_labels(), SEGMENTS, tmp_path / "x_seg.dcm",
                                       algorithm=ALGORITHM, privacy=privacy)]
        else:
            written = write_secondary_capture(volume, known_labels(), SEGMENTS, tmp_path / "sc", display=windowed,
                                              opacity=0.5, algorithm=ALGORITHM, privacy=privacy)
    said = _said(caplog.records, caught)
    for value in [*IDENTITY.values(), "HOUSE"]:  # its source UIDs it must see (the SEG references them; the
        # profile maps them after), at INFO, which app.logs.quiet_libraries keeps from being made
        assert value not in said, (value, said)
    assert "unlikely to represent the intended person name" not in said  # `anon-…^` is a proper PN
    ds = pydicom.dcmread(written[0])
    assert str(ds.PatientName) == f"{pseudonym}^" and ds.PatientID == pseudonym
    findings = dciodvfy.verify(written[0])
    assert not [w for w in findings.warnings if "Person Name" in w], findings.warnings
    assert not findings.errors, findings.errors
