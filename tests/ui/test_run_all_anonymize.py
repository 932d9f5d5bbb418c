"""The viewer's Run on all with "De-identify every output" (issue 24): the same writer, names, profile and last
check as `seglens-cli run --anonymize`; the dialog says what the checkbox does."""

from __future__ import annotations

import pytest

from tests.dicom_factory import write_series

TIMEOUT = 20_000
pytest.importorskip("dicognito")


def test_run_on_all_de_identifies_names_report_and_dicom(qtbot, make_main_window, ct_model, tmp_path, monkeypatch):
    import pydicom

    monkeypatch.setenv("SEGLENS_PSEUDONYM_KEY", "0123456789abcdef0123")
    write_series(tmp_path / "in" / "DOE^JANE_PID-0042", slices=3, patient=("DOE^JANE", "PID-0042"))
    win = make_main_window(ct_model)
    with qtbot.waitSignal(win.overlay_shown, timeout=TIMEOUT):
        win.add_paths([tmp_path / "in"])
    with qtbot.waitSignal(win.run_all_finished, timeout=TIMEOUT) as done:
        win.run_all(tmp_path / "out", volumes={"exports": ("dicom-seg", "sc", "nifti", "source"), "per_slice": True,
                                                "opacity": 0.5, "anonymize": True})
    summary, report = done.args
    assert summary.ok == 1 and summary.failed == 0
    out = tmp_path / "out"
    rows = (out / "seglens_report.csv").read_text(encoding="utf-8").splitlines()[1:]
    assert report == str(out / "seglens_report.csv") and all(row.startswith("anon-") for row in rows)
    for path in out.rglob("*"):
        assert "doe" not in path.relative_to(out).as_posix().lower()
        if path.is_file():
            data = path.read_bytes().lower()
            assert b"doe" not in data and b"jane" not in data and b"pid-0042" not in data, path.name
    dicoms = list(out.rglob("*.dcm"))
    assert len(dicoms) == 1 + 3 + 3
    assert all(pydicom.dcmread(p).PatientIdentityRemoved == "YES" for p in dicoms)


def test_the_dialog_says_what_de_identify_does(qtbot):
    from app.ui.widgets.volume_export import VolumeExportDialog

    dialog = VolumeExportDialog(2, 0.5)
    qtbot.addWidget(dialog)
    assert dialog.anonymize.text() == "De-identify every output (as seglens-cli run --anonymize)"
    assert "PS3.15" in dialog.anonymize.toolTip() and "source" in dialog.boxes
    dialog.anonymize.setChecked(True)
    dialog.boxes["source"].setChecked(True)
    assert dialog.options()["anonymize"] is True and "source" in dialog.options()["exports"]
