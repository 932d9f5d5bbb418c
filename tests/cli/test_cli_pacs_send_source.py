"""run --from NODE --anonymize --export dicom-seg,source --send RESEARCH against a real Orthanc on loopback
(tests/io/pacs/orthanc.py): the de-identified source series the SEG references is stored beside it (issue 36: only the
SEG was sent, so the research node held a SEG whose source it did not have), the copy de-identified, and the SEG's
references resolve to its stored instances."""

from __future__ import annotations

import pydicom
import pytest
from test_cli_pacs import CT_FILES, nodes, server  # noqa: F401  (fixtures: one Orthanc for this module)

from app.cli import main
from tests.dicom_factory import write_series

pytest.importorskip("dicognito")
pytest.importorskip("highdicom")


def stored(server, series_uid: str) -> list[pydicom.Dataset]:  # noqa: F811
    from io import BytesIO

    return [pydicom.dcmread(BytesIO(data)) for data in server.series_instances(series_uid)]


def test_anonymize_send_stores_the_de_identified_source_the_seg_references(nodes, server, tmp_path,  # noqa: F811
                                                                           monkeypatch, capsys):
    monkeypatch.setenv("SEGLENS_PSEUDONYM_KEY", "c2" * 32)
    files = write_series(tmp_path / "in", slices=6, rows=64, columns=64, patient=("Doe^Jane", "PID-0042"))
    header = pydicom.dcmread(files[0], stop_before_pixels=True)
    server.upload(files)
    try:
        code = main(["run", "models/ct_demo.onnx", "--from", "WEB", "--study", str(header.StudyInstanceUID),
                     "--out", str(tmp_path / "out"), "--export", "dicom-seg,source", "--anonymize", "--send",
                     "RESEARCH", "--device", "cpu", "--no-progress"])
        captured = capsys.readouterr()
        assert code == 0, captured.err
        assert "sent to RESEARCH: 7 of 7 files stored (" in captured.out
        assert "a query found 2 of 2 series complete" in captured.out
        seg_file = next((tmp_path / "out").rglob("*_seg.dcm"))
        seg = pydicom.dcmread(seg_file)
        [seg_stored] = stored(server, str(seg.SeriesInstanceUID))
        referenced = seg_stored.ReferencedSeriesSequence[0]
        copies = stored(server, str(referenced.SeriesInstanceUID))
        assert len(copies) == 6  # the source series, every instance, stored beside its SEG
        assert {str(i.ReferencedSOPInstanceUID) for i in referenced.ReferencedInstanceSequence} == \
            {str(c.SOPInstanceUID) for c in copies}
        for copy in copies:  # de-identified: not the study's own series stored again
            assert copy.PatientIdentityRemoved == "YES" and str(copy.PatientID).startswith("anon-")
            assert str(copy.SeriesInstanceUID) != str(header.SeriesInstanceUID)
            assert "doe" not in str(copy.PatientName).lower() and copy.get("PatientBirthDate", "") == ""
        assert str(copies[0].StudyInstanceUID) == str(seg_stored.StudyInstanceUID) != str(header.StudyInstanceUID)
    finally:
        server.clear()
        server.upload(CT_FILES)
