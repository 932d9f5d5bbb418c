"""REVIEW reaches the reports honestly: the run summary's counts and the HTML review report's pill and count."""

from __future__ import annotations

from pathlib import Path

from app.runs.folder.writer import RunSummary
from app.runs.review.html import ReportItem, write_review_report

SHA = "3481e429bb1e0f7828ed8c23f62ecc77d6efcaf6e631f8ba355c9752b8a1bc77"


def test_the_summary_counts_review_apart():
    assert RunSummary(passed=7, rejected=1, review=2).verdict_line() == "verdict: 7 OK, 2 REVIEW, 1 NG"
    assert RunSummary(passed=7, rejected=1).verdict_line() == "verdict: 7 OK, 1 NG"  # no band: as before
    assert RunSummary(review=3).verdict_line() == "verdict: 0 OK, 3 REVIEW, 0 NG"


def test_the_review_report_shows_a_review_pill_and_count(tmp_path: Path):
    items = [ReportItem("a.png", None, "ok"), ReportItem("b.png", None, "review", "review: score 0.55 > 0.4"),
             ReportItem("c.png", None, "review", "review: score 0.6 > 0.4"), ReportItem("d.png", None, "ng", "x")]
    page = write_review_report(tmp_path / "r.html", items, model_name="m.onnx", model_sha256=SHA,
                               seglens_version="0.1.0").read_text(encoding="utf-8")
    assert page.count('<span class="pill v-review">REVIEW</span>') == 2
    assert '<div class="count v-review"><b>2</b><span>REVIEW</span></div>' in page
    assert ".pill.v-review{" in page and ".count.v-review{" in page
    assert "review: score 0.55 &gt; 0.4" in page
