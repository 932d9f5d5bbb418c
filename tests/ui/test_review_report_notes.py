"""File ▸ Export review report with "De-identify the report" (issue 24): the reviewer's note "lung wrong for DOE
JANE" was copied verbatim into the de-identified report; it is withheld (as `seglens-cli report --anonymize`
does: app.runs.review.items.private_review), and kept as typed without De-identify."""

from __future__ import annotations

from pathlib import Path

import pytest
from dicom_factory import write_series

TIMEOUT = 20_000
WITHHELD = "[note withheld: contains patient identity]"
pytest.importorskip("dicognito")


def _noted_window(qtbot, make_main_window, ct_model, tmp_path: Path):
    root = tmp_path / "pacs_export"
    write_series(root / "DOE^JANE_PID-0042" / "ACC88123X", slices=3, patient=("DOE^JANE", "PID-0042"))
    window = make_main_window(ct_model)
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):
        window.add_paths([root])
    window.reviewer.note("lung wrong for DOE JANE")
    window.reviewer.mark("rejected")
    return window


def _report(qtbot, window, *, anonymize: bool) -> str:
    with qtbot.waitSignal(window.reporter.report_finished, timeout=TIMEOUT) as done:
        window.export_review_report(anonymize=anonymize)  # beside the review log
    ok, path = done.args
    assert ok, path
    return Path(path).read_text(encoding="utf-8")


def test_a_de_identified_report_withholds_a_note_naming_the_patient(qtbot, make_main_window, ct_model, tmp_path,
                                                                   monkeypatch):
    monkeypatch.setenv("SEGLENS_PSEUDONYM_KEY", "0123456789abcdef0123")
    window = _noted_window(qtbot, make_main_window, ct_model, tmp_path)
    html = _report(qtbot, window, anonymize=True)
    assert WITHHELD in html and "JANE" not in html and "result wrong" in html.replace("<wbr>", "").lower()


def test_without_de_identify_the_note_is_as_typed(qtbot, make_main_window, ct_model, tmp_path):
    window = _noted_window(qtbot, make_main_window, ct_model, tmp_path)
    html = _report(qtbot, window, anonymize=False)
    assert "lung wrong for DOE JANE" in html and WITHHELD not in html
