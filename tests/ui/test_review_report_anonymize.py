"""File ▸ Export review report with "De-identify the report" (issue 24 §1): a series stored under patient-named
folders is named by its pseudonym (as `seglens-cli report --anonymize` and Run on all name it), an image beside it
too, and nothing of the patient's name, ID or folders is in the HTML; without it the rows show the inputs'
relative names as before. The choice is asked after the file name, on by default when the list holds a volume."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from dicom_factory import write_series
from PIL import Image

TIMEOUT = 20_000
pytest.importorskip("dicognito")


def _patient_folder(tmp_path: Path) -> Path:
    root = tmp_path / "pacs_export"
    write_series(root / "DOE^JANE_PID-0042" / "ACC88123X", slices=3, suffix="", patient=("DOE^JANE", "PID-0042"))
    Image.fromarray(np.full((32, 32), 200, np.uint8)).save(root / "DOE^JANE_PID-0042" / "jane_photo.png")
    return root


def _report(qtbot, window, **options) -> str:
    with qtbot.waitSignal(window.reporter.report_finished, timeout=TIMEOUT) as done:
        window.export_review_report(**options)
    ok, path = done.args
    assert ok, path
    return Path(path).read_text(encoding="utf-8")


def _text(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html.replace("<wbr>", "")).split())


def _open(qtbot, make_main_window, ct_model, root: Path):
    window = make_main_window(ct_model)
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.add_paths([root])
    window.reviewer.mark("accepted")  # the first listed input: its review is shown under its pseudonym too
    return window


def test_a_de_identified_review_report_names_no_patient_and_no_folder(qtbot, make_main_window, ct_model, tmp_path,
                                                                      monkeypatch):
    monkeypatch.setenv("SEGLENS_PSEUDONYM_KEY", "0123456789abcdef0123")
    window = _open(qtbot, make_main_window, ct_model, _patient_folder(tmp_path))
    html = _report(qtbot, window, anonymize=True)
    lowered = html.replace("<wbr>", "").lower()
    for leaked in ("doe", "jane", "pid-0042", "acc88123x", "pacs_export", str(tmp_path).lower()):
        assert leaked not in lowered, leaked
    text = _text(html)
    assert "not processed" not in text
    assert html.count("data:image/jpeg;base64,") == 2  # the series and the image still drawn
    assert re.search(r"anon-[0-9a-z]+/[0-9.]+/[0-9.]+", text)  # <patient pseudonym>/<study UID>/<series UID>
    assert re.search(r"images/img-[0-9a-f]{16}", text)
    assert "slices 3" in text and text.count("result correct") == 2  # its review kept: the totals and its row


def test_without_de_identify_the_rows_show_the_inputs_names(qtbot, make_main_window, ct_model, tmp_path):
    window = _open(qtbot, make_main_window, ct_model, _patient_folder(tmp_path))
    text = _text(_report(qtbot, window, anonymize=False))
    assert "DOE^JANE_PID-0042/ACC88123X" in text and "DOE^JANE_PID-0042/jane_photo.png" in text
    assert str(tmp_path) not in text  # relative, as before


def test_de_identify_is_the_default_when_the_list_holds_a_volume(qtbot, make_main_window, ct_model, tmp_path,
                                                                 monkeypatch):
    monkeypatch.setenv("SEGLENS_PSEUDONYM_KEY", "0123456789abcdef0123")
    window = _open(qtbot, make_main_window, ct_model, _patient_folder(tmp_path))
    assert "jane" not in _report(qtbot, window).lower()


def test_the_dialog_says_what_de_identify_does_and_why_it_is_on(qtbot):
    from app.ui.widgets.report_options import ReportOptionsDialog

    with_volumes = ReportOptionsDialog(volumes=2)
    qtbot.addWidget(with_volumes)
    assert with_volumes.anonymize.isChecked() and with_volumes.options() == {"anonymize": True}
    assert with_volumes.anonymize.text() == "De-identify the report (as seglens-cli report --anonymize)"
    assert "2 DICOM or NIfTI volumes" in with_volumes.why.text()
    assert "pseudonym" in with_volumes.said.text() and "folder" in with_volumes.said.text()
    images_only = ReportOptionsDialog(volumes=0)
    qtbot.addWidget(images_only)
    assert not images_only.anonymize.isChecked() and images_only.options() == {"anonymize": False}
