"""The review report under --anonymize (issue 24): a reviewer's free-text note was copied verbatim ("lung wrong for
DOE JANE") and nothing checked the finished report for the inputs' identifying values. Now a note holding one of
them (the series' patient name, ID, institution…, or a word of an input's folder or file name) is replaced by
"[note withheld: contains patient identity]" and the rest of the report is kept; the finished page is scanned
with the last check's values (app.runs.privacy.check) and not written when one is still in it."""

from __future__ import annotations

import re
from pathlib import Path

import dicom_factory
import numpy as np
import pydicom
import pytest
from PIL import Image

from app.cli import main
from app.errors import OutputError
from app.io.discover import discover
from app.io.files import file_sha256
from app.runs.privacy.check import Identifying
from app.runs.review.html import ReportItem, write_review_report
from app.runs.review.log import ReviewLog

pytest.importorskip("dicognito")
REPO = Path(__file__).resolve().parents[3]
KEY = "0123456789abcdef" * 4
WITHHELD = "[note withheld: contains patient identity]"


def reviewed_folder(tmp_path: Path) -> tuple[Path, Path]:
    """pacs_export/DOE^JANE_PID-0042/: a series (institution in its headers) and a photo, each reviewed with a
    note: the series' names the patient, the photo's the institution only its neighbour series holds, a third
    (on a second photo) is clean."""
    inputs = tmp_path / "pacs_export"
    folder = inputs / "DOE^JANE_PID-0042"
    for path in dicom_factory.write_series(folder / "ACC88123X", slices=3, patient=("DOE^JANE", "PID-0042")):
        ds = pydicom.dcmread(path)
        ds.InstitutionName = "StMungo Hospital"
        ds.save_as(path)
    Image.fromarray(np.full((40, 48), 90, np.uint8)).save(folder / "photo_a.png")
    Image.fromarray(np.full((40, 48), 60, np.uint8)).save(folder / "photo_b.png")
    review = tmp_path / "pacs_export_review"
    review.mkdir()
    log = ReviewLog.open(review, file_sha256(REPO / "models" / "ct_demo.onnx"))
    rels = {item.rel.name: item.rel.as_posix() for item in discover([inputs])}
    series = next(rel for name, rel in rels.items() if not name.endswith(".png"))
    log.set(series, "rejected", "lung wrong for DOE JANE")
    log.set(rels["photo_a.png"], "rejected", "compare with the pid-0042 chart")
    log.set(rels["photo_b.png"], "accepted", "edge looks fine")
    return review, review / "report.html"


def test_a_note_naming_the_patient_is_withheld_under_anonymize(tmp_path, monkeypatch):
    monkeypatch.setenv("SEGLENS_PSEUDONYM_KEY", KEY)
    review, out = reviewed_folder(tmp_path)
    assert main(["report", str(review), "--model", "ct_demo", "--out", str(out), "--device", "cpu",
                 "--anonymize"]) == 0
    html = out.read_text(encoding="utf-8")
    lowered = re.sub(r"data:image/[a-z]+;base64,[A-Za-z0-9+/=]+", "", html).lower()
    for secret in ("doe", "jane", "pid-0042", "stmungo", "pacs_export"):
        assert secret not in lowered, secret
    assert html.count(WITHHELD) == 2 and "edge looks fine" in html  # a clean note stays


def test_without_anonymize_the_note_is_the_reviewers(tmp_path):
    review, out = reviewed_folder(tmp_path)
    assert main(["report", str(review), "--model", "ct_demo", "--out", str(out), "--device", "cpu"]) == 0
    html = out.read_text(encoding="utf-8")
    assert "lung wrong for DOE JANE" in html and WITHHELD not in html


def test_a_finished_report_still_holding_an_identifying_value_is_not_written(tmp_path):
    """The last check on the page itself: here a verdict reason carrying the patient's ID (a value no note
    check sees) — the report is refused in one line, and no file is left."""
    identifying = Identifying.of([("patient ID", "PID-0042"), ("patient name", "DOE^JANE")])
    items = [ReportItem("anon-0123456789ab/2.25.1/2.25.2", None, "ng", "slice 2: PID-0042 too large",
                        identifying=identifying)]
    out = tmp_path / "report.html"
    with pytest.raises(OutputError) as refused:
        write_review_report(out, items, model_name="ct_demo", model_sha256="ab" * 32, seglens_version="0")
    assert str(refused.value) == (f"{out}: the review report is not written: a patient ID of an input is still in "
                                  "it (the last check of --anonymize)")
    assert not out.exists() and list(tmp_path.iterdir()) == []
